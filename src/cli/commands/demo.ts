// `npx pd-bridge demo`: the whole bridge on one machine, bridged and native, and what happened.
// Exit 0 only when the verdict is complete, the answers match and every block is identical.
import { Command } from 'commander'
import { parseBlockSize } from '../../config/block-size.ts'
import { DEFAULT_DECODER_KIND } from '../../decoders/registry.ts'
import { EMBEDDED_DEFAULTS } from '../../stack/embedded.ts'
import { DEMO_DEFAULTS, runDemo } from '../../stack/demo/run.ts'
import { resolveStateDir } from '../../stack/state-dir.ts'
import { PRESET_NAMES, type PresetName } from '../../model/checkpoint/index.ts'
import { DECODER_OPTION_HELP, stackDecoderOption, integerOption, PREFILL_PROFILE_DEFAULT_HELP, presetOption, requireNativeKernels } from './serve.ts'

interface DemoFlags {
  stateDir?: string
  preset: PresetName
  seed: number
  blockSize: number
  prefillProfile?: string
  tokens: number
  maxTokens: number
  promptSeed?: number
  decoder: string
}

/** The demo command. */
export const demoCommand = new Command('demo')
  .description('run the embedded stack, send a fresh cold long prompt bridged (front door) and native (a decoder with an empty store), compare answers and blocks (verify-blocks), print a table, stop everything; exit 0 only when the verdict is complete, the answers match and the blocks are identical')
  .option('--state-dir <dir>', 'checkpoint, sidecar, stores and logs (default $PD_STATE_DIR or ~/.cache/pd-bridge)')
  .option('--preset <name>', `embedded model: ${PRESET_NAMES.join(' | ')}`, presetOption, EMBEDDED_DEFAULTS.preset)
  .option('--seed <n>', 'seed of the embedded checkpoint', integerOption('--seed', 0, 2 ** 32 - 1), EMBEDDED_DEFAULTS.seed)
  .option('--block-size <n>', 'tokens per decoder block (a multiple of every pool ratio of the preset)', (t: string) => parseBlockSize(t), EMBEDDED_DEFAULTS.blockSize)
  .option('--prefill-profile <name>', `numerics profile of the prefill engine (default: ${PREFILL_PROFILE_DEFAULT_HELP}), so bridged caches can be compared bit for bit`)
  .option('--tokens <n>', 'prompt length to aim for', integerOption('--tokens', 1), DEMO_DEFAULTS.tokens)
  .option('--max-tokens <n>', 'answer length', integerOption('--max-tokens', 1), DEMO_DEFAULTS.maxTokens)
  .option('--decoder <engine>', `${DECODER_OPTION_HELP}; the demo compares the bridged store with the native decoder's, so only a kind pd-bridge starts`, stackDecoderOption, DEFAULT_DECODER_KIND.name)
  .option('--prompt-seed <n>', 'seed of the prompt (default: a fresh random one each run)', integerOption('--prompt-seed', 0, 2 ** 32 - 1))
  .action(async (flags: DemoFlags) => {
    requireNativeKernels('demo')
    const result = await runDemo({
      stateDir: resolveStateDir(flags.stateDir),
      preset: flags.preset,
      seed: flags.seed,
      blockSize: flags.blockSize,
      prefillProfile: flags.prefillProfile,
      tokens: flags.tokens,
      maxTokens: flags.maxTokens,
      promptSeed: flags.promptSeed,
      decoder: flags.decoder,
      progress: process.stderr,
    })
    process.stdout.write(result.table)
    process.exitCode = result.passed ? 0 : 1
  })
