// `pd-bridge diff-state`: restore the decoder's cache from stored blocks and compare every array,
// bit for bit, with the cache a native prefill of the same tokens leaves at the same boundary.
import { readFile, stat } from 'node:fs/promises'
import { resolve } from 'node:path'
import { Command } from 'commander'
import { PdBridgeError } from '../../errors.ts'
import { DeepseekV4Engine } from '../../model/engine/index.ts'
import { DEFAULT_BLOCK_SIZE, parseBlockSize } from '../../config/block-size.ts'
import { DecoderPrefixCache, compareCaches, describeComparison, parseTokenText, type PrefixCacheEvent } from '../../decode/prefix-cache/index.ts'

interface DiffStateFlags {
  model: string
  blocks: string
  tokens: string
  profile: string
  blockSize?: string
  modelName?: string
}

async function requireDir (dir: string, flag: string): Promise<void> {
  const st = await stat(dir).catch(() => null)
  if (st === null || !st.isDirectory()) throw new PdBridgeError(`${flag} ${dir}: no such directory`)
}

function logLine (e: PrefixCacheEvent): void {
  if (e.kind === 'restore-rejected') process.stderr.write(`pd-bridge diff-state: restore rejected: ${e.reason}\n`)
  else if (e.kind === 'refused') process.stderr.write(`pd-bridge diff-state: block ${e.hash} refused (${e.reason}): ${e.detail}\n`)
  else if (e.kind === 'unreadable') process.stderr.write(`pd-bridge diff-state: unreadable block file ${e.path}: ${e.problem}\n`)
}

/** The diff-state command: exit 0 only when every restored array equals the native one bit for bit. */
export const diffStateCommand = new Command('diff-state')
  .description('restore the decoder cache from a block store and compare every array, bit for bit, with a native prefill of the same tokens up to the restored boundary; exit 0 only when all are bit-exact, 1 on any difference, 2 on bad input')
  .requiredOption('--model <dir>', 'checkpoint directory (config.json + safetensors)')
  .requiredOption('--blocks <dir>', 'block store root (holds 0/ .. f/)')
  .requiredOption('--tokens <file>', 'the prompt: a JSON array of token ids, or ids separated by whitespace or commas')
  .option('--profile <name>', 'the decoder\'s numerics profile (part of the geometry)', 'decoder')
  .option('--block-size <n>', `tokens per block (default ${DEFAULT_BLOCK_SIZE})`)
  .option('--model-name <name>', 'the model name hashed into block keys (default: the --model path, absolute)')
  .action(async (opts: DiffStateFlags) => {
    const blockSize = opts.blockSize === undefined ? DEFAULT_BLOCK_SIZE : parseBlockSize(opts.blockSize)
    await requireDir(opts.model, '--model')
    await requireDir(opts.blocks, '--blocks')
    const tokens = parseTokenText(await readFile(opts.tokens, 'utf8'), opts.tokens)
    const engine = await DeepseekV4Engine.load(opts.model, opts.profile)
    const cfg = engine.config
    const prefixCache = await DecoderPrefixCache.open({
      storeRoot: opts.blocks, modelName: opts.modelName ?? resolve(opts.model), cfg, profile: engine.profile, blockSize, log: logLine,
    })
    const out = process.stdout
    // Every stored full block counts here: the exact full-prompt rule is for serving, not checking.
    const hit = await prefixCache.lookup(tokens, { exactPromptRule: false })
    if (hit.cache === null) {
      out.write(`no cache restored from ${opts.blocks} for the ${tokens.length}-token prompt: ${hit.reason ?? 'no block matched'}\n0/0 bit-exact\n`)
      process.exitCode = 1
      return
    }
    const restored = engine.completeCarries(hit.cache)
    const T = restored.tokenCount
    out.write(`restored ${hit.blocks} block(s) = ${T} of ${tokens.length} tokens (profile ${engine.profile.name}, block size ${blockSize}); native prefill of tokens [0, ${T})\n`)
    const native = engine.newCache()
    engine.prefill(tokens.slice(0, T), native, { logits: 'none' })
    const comparisons = compareCaches(cfg, restored, native, blockSize)
    for (const c of comparisons) out.write(`${describeComparison(c)}\n`)
    const exact = comparisons.filter((c) => c.identical).length
    out.write(`${exact}/${comparisons.length} bit-exact\n`)
    process.exitCode = exact === comparisons.length ? 0 : 1
  })
