// `pd-bridge make-checkpoint`: write a deterministic synthetic DeepSeek-V4 checkpoint.
import { Command } from 'commander'
import { PdBridgeError } from '../../errors.ts'
import { expectedParameters, makeCheckpoint, presetConfig, PRESET_NAMES, isPresetName } from '../../model/checkpoint/index.ts'
import { CHECKPOINT_CHAT_FORMATS, TOKENIZER_STRUCTURES } from '../../model/tokenizer/index.ts'
import { startProgress } from '../../progress/index.ts'

// Commander hands option values over as strings; accept plain decimal integers only ("1e3", "0x10",
// "1.0" and "-1" are refused rather than silently reinterpreted).
function parseNonNegativeInteger (flag: string, text: string): number {
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(Number(text))) {
    throw new PdBridgeError(`${flag} must be a non-negative integer, got ${JSON.stringify(text)}`)
  }
  return Number(text)
}

function oneOf<T extends string> (flag: string, text: string | undefined, names: readonly T[]): T | undefined {
  if (text === undefined) return undefined
  if (!(names as readonly string[]).includes(text)) throw new PdBridgeError(`${flag}: unknown value ${JSON.stringify(text)}, expected one of ${names.join(', ')}`)
  return text as T
}

/** The make-checkpoint command. */
export const makeCheckpointCommand = new Command('make-checkpoint')
  .description('write a deterministic synthetic DeepSeek-V4 checkpoint (config, weights, tokenizer) in Hugging Face layout')
  .requiredOption('--preset <name>', `model size: ${PRESET_NAMES.join(' | ')}`)
  .requiredOption('--seed <n>', 'non-negative integer; the same preset and seed give byte-identical files')
  .requiredOption('--out <dir>', 'directory to write (created if absent)')
  .option('--max-shard-bytes <n>', 'split the weights into shards of at most N bytes of tensor data')
  .option('--force', 'write into a non-empty directory, replacing the checkpoint files there')
  .option('--mirror-indexer-heads', 'make every odd indexer head the negation of the one before it, so indexer scores are never exactly 0 and top-k never meets ties (docs/llama-cpp.md); needs an even index_n_heads')
  .option('--tokenizer-structure <name>', `tokenizer.json structure: ${TOKENIZER_STRUCTURES.join(' | ')} (DeepSeek's published one); default gpt2`)
  .option('--chat-format <name>', `${CHECKPOINT_CHAT_FORMATS.join(' | ')}: make-checkpoint's Jinja template, or none so chats render with DeepSeek-V4's own encoding (docs/tokenizer.md); default template`)
  .action(async (opts: {
    preset: string, seed: string, out: string, maxShardBytes?: string, force?: boolean, mirrorIndexerHeads?: boolean, tokenizerStructure?: string, chatFormat?: string
  }) => {
    if (!isPresetName(opts.preset)) {
      throw new PdBridgeError(`--preset: unknown preset ${JSON.stringify(opts.preset)}, expected one of ${PRESET_NAMES.join(', ')}`)
    }
    const tokenizerStructure = oneOf('--tokenizer-structure', opts.tokenizerStructure, TOKENIZER_STRUCTURES)
    const chatFormat = oneOf('--chat-format', opts.chatFormat, CHECKPOINT_CHAT_FORMATS)
    const seed = parseNonNegativeInteger('--seed', opts.seed)
    const maxShardBytes = opts.maxShardBytes === undefined ? undefined : parseNonNegativeInteger('--max-shard-bytes', opts.maxShardBytes)
    if (maxShardBytes === 0) throw new PdBridgeError('--max-shard-bytes must be at least 1')
    const progress = startProgress({ label: `make-checkpoint ${opts.preset}`, total: expectedParameters(presetConfig(opts.preset)).length, unit: 'tensors' })
    let made
    try {
      made = await makeCheckpoint({
        preset: opts.preset, seed, out: opts.out, maxShardBytes, force: opts.force === true, mirrorIndexerHeads: opts.mirrorIndexerHeads === true,
        tokenizerStructure, chatFormat, onTensor: (done) => progress.tick(done),
      })
    }
    catch (err) {
      progress.fail()
      throw err
    }
    progress.done()
    process.stdout.write(
      `wrote ${made.dir}: preset ${opts.preset}, seed ${seed}, ${made.tensorCount} tensors, ` +
      `${made.parameterCount} parameters\n${made.files.map((f) => `  ${f}\n`).join('')}`,
    )
  })
