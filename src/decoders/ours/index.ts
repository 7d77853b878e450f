// The kind `ours`: the embedded decoder (src/engines/decoder) over our engine, with the paged SSD
// block store in oMLX's layout (src/decode/). The bridge writes blocks through the decoder's own
// prefix cache, so what it writes is what the decoder itself would have written.
import { join } from 'node:path'
import { DecoderPrefixCache } from '../../decode/prefix-cache/index.ts'
import { DECODER_CLIENT_ROUTES } from '../../engines/decoder/routes.ts'
import { DECODER_DEFAULTS, launchDecoder } from '../../engines/decoder/launch.ts'
import { PdBridgeError } from '../../errors.ts'
import { EMBEDDED_SERVER_RULES } from '../embedded-request-rules.ts'
import type { DecoderKind } from '../kind.ts'
import { presentKeys, promptBlockKeys, verifyPromptBlocks } from './demo-blocks.ts'
import { BLOCK_STORE_LABEL, blockStoreTarget } from './target.ts'

const NAME = 'ours'

export const oursKind: DecoderKind = {
  name: NAME,
  summary: 'our engine\'s decoder, with a block store in oMLX\'s layout',
  homes: ['src/decoders/ours'],
  cacheMath: DECODER_DEFAULTS.profile,
  configKeys: ['profile'],
  geometrySource: (decoder) => `profile ${decoder.profile}`,
  command: {
    flags: ['--max-batch', '--batch-memory-bytes', '--prefill-chunk', '--max-cache-bytes'],
    check: (opts) => {
      if (opts.cacheDir === undefined) throw new PdBridgeError(`--cache-dir is required with --engine ${NAME}`)
    },
    launch: async (opts, context) => {
      const launched = await launchDecoder({
        cacheDir: opts.cacheDir!,
        modelDir: opts.model,
        profile: opts.profile,
        blockSize: opts.blockSize,
        maxCacheBytes: opts.maxCacheBytes,
        host: opts.host,
        port: opts.port,
        modelName: opts.modelName,
        maxTokens: opts.maxTokens,
        maxBodyBytes: opts.maxBodyBytes,
        maxQueue: opts.maxQueue,
        maxBatch: opts.maxBatch,
        batchMemoryBytes: opts.batchMemoryBytes,
        prefillChunk: opts.prefillChunk,
        logger: context.logger,
        apiKey: context.apiKey,
        blockKey: context.blockKey,
      })
      return {
        ready: {
          url: launched.server.url,
          model: launched.modelName,
          profile: launched.model.profileName,
          cache_dir: opts.cacheDir,
          block_size: opts.blockSize,
          geometry_fingerprint: launched.geometryFingerprint,
          // Whether blocks are authenticated (PD_BLOCK_KEY or PD_API_KEY set), never the key.
          blocks_authenticated: context.blockKey !== undefined,
          pid: process.pid,
        },
        close: async () => { await launched.server.close() },
      }
    },
  },
  store: {
    label: BLOCK_STORE_LABEL,
    sweepTempsAtStart: true,
    openTarget: async (o) => blockStoreTarget(await DecoderPrefixCache.open({
      storeRoot: o.cacheDir,
      modelName: o.modelName,
      cfg: o.cfg,
      profile: o.decoder.profile,
      blockSize: o.blockSize,
      authKey: o.authKey,
      log: o.log,
    }), { builders: o.builders }),
  },
  requestRules: EMBEDDED_SERVER_RULES,
  clientRoutes: DECODER_CLIENT_ROUTES,
  stack: {
    mirrorIndexerHeads: false,
    needsGguf: false,
    storeLabel: (profile) => profile,
    decoderArgs: ({ profile }) => ['--profile', profile],
    frontDecoderConfig: {},
  },
  demo: {
    modelNote: '',
    nativeLeg: 'a decoder with an empty block store',
    passLine: 'PASS: verdict complete, answers identical, every bridged block identical to the native decoder\'s',
    present: presentKeys,
    compare: async (o) => {
      const blocks = await verifyPromptBlocks(o.bridgedStore, o.nativeStore, promptBlockKeys(o.modelName, o.tokens, o.blockSize), join(o.workDir, 'verify'))
      return { blocks, verifyCommand: `pd-bridge verify-blocks ${blocks.bridgedDir} ${blocks.nativeDir}` }
    },
    problem: (c) => {
      const r = c.blocks?.report
      if (r === undefined) return 'no block comparison'
      return r.total === 0 ? 'no blocks to compare' : r.identical !== r.total ? `${r.total - r.identical} of ${r.total} blocks differ` : ''
    },
    rows: (c) => {
      const b = c.blocks
      if (b === undefined) return [['verify-blocks', '(not compared)']]
      const missing = [
        b.missingBridged.length > 0 ? `${b.missingBridged.length} missing from the bridged store` : '',
        b.missingNative.length > 0 ? `${b.missingNative.length} missing from the native store` : '',
      ].filter((x) => x !== '')
      return [
        ['verify-blocks', `${b.report.identical}/${b.report.total} identical${missing.length > 0 ? ` (${missing.join(', ')})` : ''}`],
        ['', c.verifyCommand ?? ''],
      ]
    },
  },
}
