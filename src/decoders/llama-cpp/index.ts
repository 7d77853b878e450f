// The kind `llama.cpp`: node-llama-cpp on the CPU behind the embedded decoder's HTTP layer
// (src/engines/llama-cpp), with a store of sequence-state files, one per block boundary. Its GGUF
// is f32 and its cache F32, so captures are computed in our f32 profile, the arithmetic whose caches
// llama.cpp's own agree with (docs/llama-cpp.md).
import { DECODER_CLIENT_ROUTES } from '../../engines/decoder/routes.ts'
import { DECODER_DEFAULTS } from '../../engines/decoder/launch.ts'
import { launchLlamaCppDecoder } from '../../engines/llama-cpp/decoder/index.ts'
import { sectionDistanceLine, stateGeometry } from '../../engines/llama-cpp/state/index.ts'
import { PdBridgeError } from '../../errors.ts'
import { loadDeepseekV4Config } from '../../model/config.ts'
import { EMBEDDED_SERVER_RULES } from '../embedded-request-rules.ts'
import type { DecoderKind } from '../kind.ts'
import { comparePromptStates, presentStates } from './demo-states.ts'
import { llamaCppTarget } from './target.ts'

const NAME = 'llama.cpp'

function n (x: number): string {
  return x.toLocaleString('en-US')
}

export const llamaCppKind: DecoderKind = {
  name: NAME,
  summary: 'node-llama-cpp on the CPU on a GGUF of the checkpoint, with a store of sequence states',
  homes: ['src/decoders/llama-cpp', 'src/engines/llama-cpp'],
  cacheMath: 'f32',
  configKeys: ['kvCacheType'],
  geometrySource: () => 'llama.cpp\'s context settings',
  command: {
    flags: ['--gguf', '--kv-cache-type', '--threads', '--context-size'],
    check: (opts) => {
      const oursOnly = ([['--max-batch', opts.maxBatch], ['--batch-memory-bytes', opts.batchMemoryBytes], ['--prefill-chunk', opts.prefillChunk]] as const).filter(([, v]) => v !== undefined).map(([f]) => f)
      if (oursOnly.length > 0) throw new PdBridgeError(`${oursOnly.join(', ')}: only with --engine ours (the llama.cpp decoder runs one request at a time)`)
      if (opts.gguf === undefined) throw new PdBridgeError(`--gguf is required with --engine ${NAME} (make one with pd-bridge export-gguf --model DIR --out FILE.gguf)`)
      if (opts.profile !== DECODER_DEFAULTS.profile) throw new PdBridgeError('--profile: only with --engine ours (llama.cpp runs its own arithmetic)')
      if (opts.maxCacheBytes !== undefined) throw new PdBridgeError('--max-cache-bytes: only with --engine ours (the llama.cpp state store does not evict)')
    },
    launch: async (opts, context) => {
      const launched = await launchLlamaCppDecoder({
        modelDir: opts.model,
        gguf: opts.gguf!,
        cacheDir: opts.cacheDir,
        blockSize: opts.blockSize,
        kvCacheType: opts.kvCacheType,
        threads: opts.threads,
        contextSize: opts.contextSize,
        host: opts.host,
        port: opts.port,
        modelName: opts.modelName,
        maxTokens: opts.maxTokens,
        maxBodyBytes: opts.maxBodyBytes,
        maxQueue: opts.maxQueue,
        logger: context.logger,
        apiKey: context.apiKey,
        blockKey: context.blockKey,
      })
      return {
        ready: {
          url: launched.server.url,
          model: launched.modelName,
          profile: launched.model.profileName,
          cache_dir: opts.cacheDir ?? null,
          block_size: launched.blockSize,
          geometry_fingerprint: launched.geometryFingerprint,
          blocks_authenticated: context.blockKey !== undefined,
          pid: process.pid,
          engine: NAME,
          gguf: launched.gguf,
          kv_cache_type: launched.context.kvCacheType,
          context_size: launched.context.contextSize,
        },
        close: launched.close,
      }
    },
  },
  store: {
    label: NAME,
    sweepTempsAtStart: false,
    openTarget: async (o) => llamaCppTarget({ dir: o.cacheDir, modelName: o.modelName, cfg: o.cfg, blockSize: o.blockSize, kvCacheType: o.decoder.kvCacheType, authKey: o.authKey }),
  },
  // The llama.cpp decoder runs the embedded decoder's HTTP layer: the same rules and routes.
  requestRules: EMBEDDED_SERVER_RULES,
  clientRoutes: DECODER_CLIENT_ROUTES,
  stack: {
    // llama.cpp's top-k breaks exact score ties in another order than ours (docs/llama-cpp.md,
    // "Indexer ties"): mirrored heads make ties impossible, so the caches differ by arithmetic only.
    mirrorIndexerHeads: true,
    needsGguf: true,
    // Its cache is F32 from an f32 GGUF: captures must be f32, so transformers must run in f32 too.
    torchPrefillProblem: (dtype) => dtype === 'f32' ? undefined : `llama.cpp as the decoder needs f32 captures; the transformers prefill engine would run ${dtype} (give --torch-dtype f32, or use our prefill engine)`,
    // Records name it with its weights, cache type and threads (as many as ours uses: the machine's cores).
    environmentLabel: (threads) => `${NAME} (f32 GGUF, F32 cache, ${threads} threads)`,
    storeLabel: (profile) => `${NAME}-${profile}`,
    decoderArgs: ({ gguf, threads }) => {
      if (gguf === undefined) throw new PdBridgeError('the llama.cpp decoder needs its GGUF')
      return ['--gguf', gguf, '--kv-cache-type', 'F32', '--threads', String(threads)]
    },
    frontDecoderConfig: { kvCacheType: 'F32' },
  },
  demo: {
    modelNote: 'decoder llama.cpp (f32 GGUF, F32 cache), ',
    nativeLeg: 'a llama.cpp decoder with an empty state store',
    passLine: 'PASS: verdict complete, answers identical to llama.cpp\'s own prefill, the bridged state compared with llama.cpp\'s',
    present: presentStates,
    compare: async (o) => {
      const g = stateGeometry(await loadDeepseekV4Config(o.checkpointDir), { kvCacheType: 'F32', flashAttention: false })
      return { states: await comparePromptStates(o.bridgedStore, o.nativeStore, o.modelName, o.tokens, o.blockSize, o.bridgedTokens, g) }
    },
    problem: (c) => {
      const st = c.states
      if (st === undefined) return 'no state comparison'
      if (st.missing.length > 0) return `no state file at the bridged boundary in the ${st.missing.join(' and ')} store`
      return st.sections.length === 0 ? 'no state sections compared' : ''
    },
    rows: (c) => {
      const st = c.states
      if (st === undefined) return [['state vs llama.cpp', '(not compared)']]
      if (st.missing.length > 0) return [['state vs llama.cpp', `missing in the ${st.missing.join(' and ')} store at ${n(st.boundary)} tokens`]]
      const values = st.sections.reduce((a, d) => a + d.values, 0)
      const identical = st.sections.reduce((a, d) => a + d.identical, 0)
      const worst = Math.max(0, ...st.sections.map((d) => d.maxUlp))
      return [
        ['state vs llama.cpp', `after ${n(st.boundary)} tokens, bridge-built vs llama.cpp's own: ${n(identical)}/${n(values)} values identical (${(100 * identical / Math.max(1, values)).toFixed(2)}%), worst ${n(worst)} ulp`],
        ...st.sections.map((d): [string, string] => ['', sectionDistanceLine(d)]),
      ]
    },
  },
}
