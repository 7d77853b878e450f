// `pd-bridge make-checkpoint`: write a deterministic synthetic DeepSeek-V4 checkpoint.
import { Command } from 'commander'
import { PdBridgeError } from '../../errors.ts'
import { expectedParameters, makeCheckpoint, presetConfig, PRESET_NAMES, isPresetName } from '../../model/checkpoint/index.ts'
import { startProgress } from '../../progress/index.ts'

// Commander hands option values over as strings; accept plain decimal integers only ("1e3", "0x10",
// "1.0" and "-1" are refused rather than silently reinterpreted).
function parseNonNegativeInteger (flag: string, text: string): number {
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(Number(text))) {
    throw new PdBridgeError(`${flag} must be a non-negative integer, got ${JSON.stringify(text)}`)
  }
  return Number(text)
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
  .action(async (opts: { preset: string, seed: string, out: string, maxShardBytes?: string, force?: boolean, mirrorIndexerHeads?: boolean }) => {
    if (!isPresetName(opts.preset)) {
      throw new PdBridgeError(`--preset: unknown preset ${JSON.stringify(opts.preset)}, expected one of ${PRESET_NAMES.join(', ')}`)
    }
    const seed = parseNonNegativeInteger('--seed', opts.seed)
    const maxShardBytes = opts.maxShardBytes === undefined ? undefined : parseNonNegativeInteger('--max-shard-bytes', opts.maxShardBytes)
    if (maxShardBytes === 0) throw new PdBridgeError('--max-shard-bytes must be at least 1')
    const progress = startProgress({ label: `make-checkpoint ${opts.preset}`, total: expectedParameters(presetConfig(opts.preset)).length, unit: 'tensors' })
    let made
    try {
      made = await makeCheckpoint({ preset: opts.preset, seed, out: opts.out, maxShardBytes, force: opts.force === true, mirrorIndexerHeads: opts.mirrorIndexerHeads === true, onTensor: (done) => progress.tick(done) })
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
