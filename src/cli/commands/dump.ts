// `pd-bridge dump`: run a checkpoint under a numerics profile and write attention inputs, caches,
// logits and greedy tokens under harness/hf_reference.py's names (docs/engine.md, "The dump").
import { Command } from 'commander'
import { PdBridgeError } from '../../errors.ts'
import { checkDumpTarget, dumpCheckpoint, readTokenIds, writeDump } from '../../model/dump.ts'
import { getProfile } from '../../model/profiles/index.ts'
import { dumpCheckpointMlxCpu, MLX_CPU_DUMP_PROFILE } from '../../capture/mlx-cpu/dump.ts'

// Plain decimal integers only: "1e3", "0x10", "1.5" and "-1" are refused, not reinterpreted.
function parseCount (flag: string, text: string): number {
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(Number(text))) {
    throw new PdBridgeError(`${flag} must be a non-negative integer, got ${JSON.stringify(text)}`)
  }
  return Number(text)
}

/** A numerics profile's name, or the refusal naming mlx-cpu beside the profiles. */
function profileName (name: string): string {
  try {
    return getProfile(name).name
  }
  catch (err) {
    if (err instanceof Error) err.message += `; or ${MLX_CPU_DUMP_PROFILE} (the caches by MLX's CPU arithmetic)`
    throw err
  }
}

interface DumpFlags {
  model: string
  tokens: string
  profile: string
  split?: string
  greedy?: string
  out: string
  force?: boolean
  attnInputs: boolean
}

/** The dump command. */
export const dumpCommand = new Command('dump')
  .description('prefill a checkpoint under a numerics profile and write per-layer attention inputs, every cache tensor, logits and greedy tokens to one safetensors file, named as harness/hf_reference.py names them')
  .requiredOption('--model <dir>', 'checkpoint directory (config.json + safetensors)')
  .requiredOption('--tokens <file>', 'the prompt: a JSON array of token ids, or a safetensors file with an input_ids tensor (I64 or I32, any shape)')
  .requiredOption('--profile <name>', `numerics profile: f32 | hf-bf16 | decoder | prefill, optionally +refquant; or ${MLX_CPU_DUMP_PROFILE} (the caches by MLX's CPU arithmetic, the forward pass the decoder profile's)`)
  .option('--split <n>', 'also prefill [0, N) then [N, T) and dump it under chunked.; 0 < N < T')
  .option('--greedy <k>', 'generate K greedy tokens after the prompt (default 0: none)')
  .requiredOption('--out <file>', 'the .safetensors file to write')
  .option('--force', 'replace --out if it exists')
  .option('--no-attn-inputs', 'leave out the per-layer attention inputs (T x hidden floats per layer and pass)')
  .action(async (opts: DumpFlags) => {
    const started = performance.now()
    const mlx = opts.profile === MLX_CPU_DUMP_PROFILE
    const profile = mlx ? MLX_CPU_DUMP_PROFILE : profileName(opts.profile)
    const split = opts.split === undefined ? undefined : parseCount('--split', opts.split)
    const greedy = opts.greedy === undefined ? 0 : parseCount('--greedy', opts.greedy)
    await checkDumpTarget(opts.out, opts.force === true)
    const tokens = await readTokenIds(opts.tokens)
    if (split !== undefined && (split <= 0 || split >= tokens.length)) {
      throw new PdBridgeError(`--split ${split} is out of range: it must satisfy 0 < N < T = ${tokens.length} (the tokens in ${opts.tokens})`)
    }
    const request = { model: opts.model, profile, tokens, split, greedy, attnInputs: opts.attnInputs }
    const dump = mlx ? await dumpCheckpointMlxCpu(request) : await dumpCheckpoint(request)
    await writeDump(opts.out, dump)
    const seconds = (performance.now() - started) / 1000
    process.stdout.write(
      `wrote ${opts.out}: ${dump.tensors.size} tensors, T=${tokens.length}, profile ${profile}, ` +
      `split ${split ?? 'none'}, greedy ${greedy}, checkpoint ${dump.metadata.checkpoint_sha256.slice(0, 16)}..., ${seconds.toFixed(1)} s\n`,
    )
  })
