// `pd-bridge gate`: the window-change gate (docs/window-gate.md). Reads the four places the window
// lives in, compares their effective rope tables bit for bit, checks every limit sized against the
// window, the decoder's store and the seed ledger, runs the hook against the decoder above the
// native window, and requires a needle retrieved through the bridge above the native window with a
// fresh seed (live with --needle-url, or from --needle-record files). Prints the report with a
// one-line verdict last; exit 0 only when it passes. The report files go to --report-dir, by
// default a new folder under the state directory (never the current folder); the report's
// next-to-last line names it.
import { stat } from 'node:fs/promises'
import { dirname, join, resolve } from 'node:path'
import { Command } from 'commander'
import { PdBridgeError } from '../../src/errors.ts'
import { loadLaunchParams, renderReport, runGate } from '../gate/index.ts'
import { embeddedTarget, GATE_EMBEDDED_PRESET, type EmbeddedTarget } from '../gate/embedded.ts'
import { resolveStateDir } from '../../src/stack/state-dir.ts'
import { isPresetName, PRESET_NAMES, type PresetName } from '../../src/model/checkpoint/index.ts'

interface GateFlags {
  launch?: string
  prefillConfig?: string
  sidecar?: string
  decoderConfig?: string
  config?: string
  decoderModel?: string
  store?: string
  modelName?: string
  fix?: boolean
  ledger?: string
  document?: string[]
  native: boolean
  nativeTokens?: string
  seed?: string
  needleUrl?: string
  needleNativeUrl?: string
  needleSeed?: string
  needleTokens?: string
  needleRecord?: string[]
  angleThreshold?: string
  reportDir?: string
  stateDir?: string
  report: boolean
  embedded?: boolean
  preset?: string
  needleTimeoutS?: string
}

/** Each live needle leg's limit when --needle-timeout-s is not given: a hang, not a slow machine. */
export const DEFAULT_NEEDLE_TIMEOUT_S = 600

/** The options that name a deployment's files: --embedded finds them itself, so they do not go with it. */
const PLACE_FLAGS = [['launch', '--launch'], ['prefillConfig', '--prefill-config'], ['sidecar', '--sidecar'], ['decoderConfig', '--decoder-config'], ['config', '--config'], ['store', '--store']] as const

/**
 * Where a gate's report goes when --report-dir is not given: a folder of its own under the state
 * directory (--state-dir, else $PD_STATE_DIR, else ~/.cache/pd-bridge), so two runs never mix their
 * plots and nothing lands in the folder the command was run from.
 */
export function defaultGateReportDir (stateDir?: string, at: Date = new Date(), env: NodeJS.ProcessEnv = process.env): string {
  return join(resolveStateDir(stateDir, env), 'gate-reports', `${at.toISOString().replace(/[:.]/g, '-')}-${process.pid}`)
}

function positiveInt (flag: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(Number(text)) || Number(text) < 1) throw new PdBridgeError(`${flag} must be a positive integer, got ${JSON.stringify(text)}`)
  return Number(text)
}

function nonNegativeInt (flag: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(Number(text))) throw new PdBridgeError(`${flag} must be a non-negative integer, got ${JSON.stringify(text)}`)
  return Number(text)
}

function positiveNumber (flag: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined
  const n = Number(text)
  if (text.trim() === '' || !Number.isFinite(n) || n <= 0) throw new PdBridgeError(`${flag} must be a positive number, got ${JSON.stringify(text)}`)
  return n
}

/**
 * The launch file: --launch, else `launch.env` beside --config (the embedded stack writes the pair
 * into <state>/run/ at every start), else an error saying what to give.
 */
async function launchFileOf (flags: GateFlags): Promise<string> {
  if (flags.launch !== undefined) return flags.launch
  if (flags.config !== undefined) {
    const beside = join(dirname(resolve(flags.config)), 'launch.env')
    if (await stat(beside).then((s) => s.isFile(), () => false)) return beside
    throw new PdBridgeError(`--launch: not given, and there is no launch.env beside --config ${flags.config}; give the launch parameters the engines were started with (docs/window-gate.md)`)
  }
  throw new PdBridgeError('--launch is required (or --config with a launch.env beside it, as the embedded stack writes)')
}

/** --prefill-config's default: the launch file's PD_PREFILL_MODEL. */
async function prefillConfigOf (launchFile: string): Promise<string> {
  const launch = await loadLaunchParams(launchFile)
  if (launch.prefillModel === undefined) throw new PdBridgeError(`--prefill-config: not given, and ${launchFile} sets no PD_PREFILL_MODEL; give the prefill node's config.json`)
  return launch.prefillModel
}

/** The numeric flags, checked. */
interface GateNumbers {
  nativeTokens?: number
  seed?: number
  needleSeed?: number
  needleTokens?: number
  needleTimeoutS: number
  angleThreshold?: number
}

function gateNumbers (flags: GateFlags): GateNumbers {
  return {
    nativeTokens: positiveInt('--native-tokens', flags.nativeTokens),
    seed: positiveInt('--seed', flags.seed),
    needleSeed: nonNegativeInt('--needle-seed', flags.needleSeed),
    needleTokens: positiveInt('--needle-tokens', flags.needleTokens),
    needleTimeoutS: positiveInt('--needle-timeout-s', flags.needleTimeoutS) ?? DEFAULT_NEEDLE_TIMEOUT_S,
    angleThreshold: positiveNumber('--angle-threshold', flags.angleThreshold),
  }
}

/** --preset's value: only with --embedded, one of the presets. */
function embeddedPreset (flags: GateFlags): PresetName {
  if (flags.preset === undefined) return GATE_EMBEDDED_PRESET
  if (flags.embedded !== true) throw new PdBridgeError('--preset goes with --embedded (the preset of the stack the gate starts)')
  if (!isPresetName(flags.preset)) throw new PdBridgeError(`--preset: unknown preset ${JSON.stringify(flags.preset)}, expected one of ${PRESET_NAMES.join(', ')}`)
  return flags.preset
}

/** The sentence on the findings of a needle the gate ran on its own. */
export function selfRunNote (url: string, timeoutS: number): string {
  return `self-run: no --needle-record or --needle-url was given, so the gate ran one needle document through the deployment's own front door ${url}, each leg bounded at ${timeoutS} s`
}

/** The gate command. */
export const gateCommand = new Command('gate')
  .description('the window-change gate: the four places (launch parameters, prefill config, sidecar, decoder config) must imply bit-identical rope tables; limits sized against the window, the store\'s block geometry and reused seeds are checked; the hook must match the decoder bit for bit above the native window; a needle must be retrieved through the bridge above the native window with a fresh seed (--needle-url or --needle-record; with --embedded the gate runs one itself). Exit 0 only when everything passes')
  .option('--launch <file>', 'launch parameters: env file (PD_MAX_MODEL_LEN=..., comments allowed) or a JSON object of the same keys; default: launch.env beside --config (the embedded stack writes one)')
  .option('--prefill-config <file>', 'the prefill node\'s config.json (or its checkpoint directory); default: the launch file\'s PD_PREFILL_MODEL')
  .option('--sidecar <dir>', 'the sidecar directory (sidecar.json + weights.safetensors); default: the --config\'s sidecar')
  .option('--decoder-config <file>', 'the decoder\'s config.json (or its checkpoint directory); default: the --config\'s decoder.model')
  .option('--config <file>', 'the front door\'s deployment config (JSON): its bridge cap, block size, profile, capture budget and deadlines are checked too, and its paths fill --sidecar, --decoder-config, --store and --model-name')
  .option('--decoder-model <dir>', 'the decoder\'s checkpoint for the bridge-vs-native check (default: the directory of --decoder-config)')
  .option('--store <dir>', 'the decoder\'s block store: blocks of another geometry are counted')
  .option('--model-name <name>', 'only count store blocks of this model name (a shared store)')
  .option('--fix', 'move store blocks of another geometry into <store>/_quarantine/ (rename, never delete)')
  .option('--ledger <file>', 'a seed ledger: documents cached under another geometry')
  .option('--document <file...>', 'token files (JSON array, or ids separated by blanks/commas) to check against the ledger')
  .option('--no-native', 'skip the bridge-vs-native check (reported as skipped)')
  .option('--native-tokens <n>', 'prompt length of the bridge-vs-native check (default: the original window plus max(64, original/16))')
  .option('--seed <n>', 'its prompt seed (default: a fresh random seed)')
  .option('--needle-url <url>', 'the bridged front door: run one needle document (built with the decoder\'s tokenizer, the needle at depth 1) through it')
  .option('--needle-native-url <url>', 'the decoder alone: asked the same needle, for context only')
  .option('--needle-seed <n>', 'the needle document\'s seed (default: a fresh random seed; a given seed needs --ledger)')
  .option('--needle-tokens <n>', 'the needle document\'s length (default: the original window + 2 blocks + 256)')
  .option('--needle-record <file|dir...>', 'needle run records from protocols/needle.mjs (files, or directories of *.json)')
  .option('--angle-threshold <rad>', 'report where the angle error first exceeds this (radians, default 0.1)')
  .option('--report-dir <dir>', 'where report.md, report.json and the SVG plots go (default: a new folder under <state dir>/gate-reports/)')
  .option('--state-dir <dir>', 'the state directory of the default report folder (default $PD_STATE_DIR or ~/.cache/pd-bridge)')
  .option('--no-report', 'write no report files')
  .option('--embedded', 'gate the embedded stack of the state directory: the one `pd-bridge serve` runs from it, or else one the gate starts there (making the checkpoint and sidecar as serve does) and stops after; its config, launch file, sidecar, decoder and store are found there, and without --needle-record or --needle-url the gate runs one needle through its front door')
  .option('--preset <name>', `with --embedded: the preset of the stack the gate starts when none runs (default ${GATE_EMBEDDED_PRESET}: tiny's geometry with weights that retrieve; tiny's random weights never retrieve a needle)`)
  .option('--needle-timeout-s <s>', `each leg of a live needle run may take this long before it counts as failed (default ${DEFAULT_NEEDLE_TIMEOUT_S})`)
  .action(async (flags: GateFlags) => {
    const reportDir = !flags.report ? undefined : flags.reportDir ?? defaultGateReportDir(flags.stateDir)
    // Every flag is checked before a stack starts: a mistake is one line, exit 2, nothing started.
    const numbers = gateNumbers(flags)
    const preset = embeddedPreset(flags)
    let target: EmbeddedTarget | undefined
    if (flags.embedded === true) {
      const given = PLACE_FLAGS.find(([key]) => flags[key] !== undefined)
      if (given !== undefined) throw new PdBridgeError(`${given[1]} does not go with --embedded: the gate finds the embedded deployment's files in the state directory`)
      try {
        target = await embeddedTarget(resolveStateDir(flags.stateDir), preset, (line) => process.stderr.write(`${line}\n`))
      }
      catch (e) {
        // A deployment that does not start fails the gate (exit 1); it is no command-line mistake.
        if (!(e instanceof PdBridgeError)) throw e
        process.stderr.write(`pd-bridge gate: the embedded stack did not start: ${e.message}\n`)
        process.stdout.write(`gate: FAIL (the embedded stack from ${resolveStateDir(flags.stateDir)} did not start)\n`)
        process.exitCode = 1
        return
      }
    }
    try {
      await gateAndPrint(flags, numbers, reportDir, target)
    }
    finally {
      await target?.release()
    }
  })

/** Run the gate on the flags (or on the embedded target's files) and print its report; exit code 1 when it fails. */
async function gateAndPrint (flags: GateFlags, numbers: GateNumbers, reportDir: string | undefined, target: EmbeddedTarget | undefined): Promise<void> {
  const noEvidence = flags.needleUrl === undefined && (flags.needleRecord ?? []).length === 0
  const selfRun = target !== undefined && noEvidence
  if (target !== undefined) flags = { ...flags, config: target.config }
  const launch = await launchFileOf(flags)
  const report = await runGate({
    launch,
    prefillConfig: flags.prefillConfig ?? await prefillConfigOf(launch),
    sidecar: flags.sidecar,
    decoderConfig: flags.decoderConfig,
    config: flags.config,
    decoderModel: flags.decoderModel,
    store: flags.store,
    modelName: flags.modelName,
    fix: flags.fix === true,
    ledger: flags.ledger,
    documents: flags.document,
    native: flags.native,
    nativeTokens: numbers.nativeTokens,
    seed: numbers.seed,
    needleUrl: selfRun ? target!.frontUrl : flags.needleUrl,
    needleNativeUrl: flags.needleNativeUrl,
    needleSeed: numbers.needleSeed,
    needleTokens: numbers.needleTokens,
    needleRecords: flags.needleRecord,
    needleTimeoutMs: numbers.needleTimeoutS * 1000,
    needleSelfRun: selfRun ? selfRunNote(target!.frontUrl, numbers.needleTimeoutS) : undefined,
    angleThreshold: numbers.angleThreshold,
    reportDir,
  })
  // The report names its own folder (`report: <dir>/report.md ...`, just above the verdict).
  process.stdout.write(renderReport(report))
  if (!report.verdict.pass) process.exitCode = 1
}
