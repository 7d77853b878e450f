// `pd-bridge serve`: with no config, the embedded default (checkpoint, sidecar, prefill engine,
// share, decoder and front door on 127.0.0.1); with --config, the front door alone for a
// deployment whose engines run elsewhere. Either way every process is a supervised child with its
// own log; a child that exits is restarted on its port (backoff, a limit), and Ctrl-C stops them all.
import { Command, InvalidArgumentError } from 'commander'
import pino from 'pino'
import { DECODER_KINDS, DEFAULT_DECODER_KIND, decoderKind, findDecoderKind, kindNamesText } from '../../decoders/registry.ts'
import { parseBlockSize } from '../../config/block-size.ts'
import { ConfigError, PdBridgeError } from '../../errors.ts'
import { DEFAULT_ADDON_PATH, loadNativeKernels } from '../../kernels/index.ts'
import { isPresetName, PRESET_NAMES, type PresetName } from '../../model/checkpoint/index.ts'
import { describeStackEvent } from '../../stack/describe.ts'
import { EMBEDDED_DEFAULTS, startEmbeddedStack, type DecoderEngine, type StackEvent } from '../../stack/embedded.ts'
import { startFrontOnly } from '../../stack/front-only.ts'
import { resolveStateDir } from '../../stack/state-dir.ts'
import type { SupervisorEvent } from '../../stack/supervisor.ts'
import { runUntilStopped } from '../../stack/until-stopped.ts'
import { resolve } from 'node:path'

/** A decimal integer flag in [min, max]. */
export function integerOption (flag: string, min: number, max = Number.MAX_SAFE_INTEGER): (text: string) => number {
  return (text) => {
    if (!/^\d{1,16}$/.test(text) || Number(text) < min || Number(text) > max) {
      throw new ConfigError(flag, `${JSON.stringify(text)} is not an integer in [${min}, ${max}]`)
    }
    return Number(text)
  }
}

/** --preset's value, checked. */
export function presetOption (text: string): PresetName {
  if (!isPresetName(text)) throw new ConfigError('--preset', `unknown preset ${JSON.stringify(text)}, expected one of ${PRESET_NAMES.join(', ')}`)
  return text
}

/**
 * Refuse to start `command` when the native kernels (native/build) are missing, fail to load or are a
 * stale build: the embedded engines need them and would otherwise fail at their first request. One
 * line that names the addon and says to run npm run build:native (loadNativeKernels' own message).
 */
export function requireNativeKernels (command: string, path: string = DEFAULT_ADDON_PATH): void {
  try {
    loadNativeKernels(path)
  }
  catch (err) {
    if (!(err instanceof PdBridgeError)) throw err
    throw new PdBridgeError(`${command} cannot start: ${err.message.replace(/\s*\n\s*/g, ' ')}`, { cause: err })
  }
}

/** serve's line for a restart: which child, how it ended, when and on which port it comes back, how many restarts are left. */
export function restartLine (e: Extract<SupervisorEvent, { kind: 'restarting' }>): string {
  const how = e.exit.signal !== null ? `was killed by ${e.exit.signal}` : `exited with code ${String(e.exit.code)}`
  const where = e.port !== undefined ? ` on port ${e.port}` : ''
  return `${e.name} (pid ${e.pid}) ${how}; restarting it${where} in ${(e.delayMs / 1000).toFixed(1)} s (restart ${e.attempt} of at most ${e.limit} within ${Math.round(e.windowMs / 1000)} s of up time)`
}

interface ServeOptions {
  config?: string
  stateDir?: string
  preset: PresetName
  seed: number
  blockSize: number
  prefillProfile?: string
  decoder: string
  host: string
  port: number
  /** An external kind's serve flags (external.serveFlags), by commander key. */
  [externalFlag: string]: unknown
}

/** `--decoder`: a decoder kind's name (src/decoders/registry.ts). */
export function decoderEngineOption (v: string): DecoderEngine {
  const kind = findDecoderKind(v)
  if (kind !== undefined) return kind.name
  throw new InvalidArgumentError(`--decoder ${v}: expected ${kindNamesText()}`)
}

/** The kinds the embedded stack starts itself (no `external` part): the demo's, which runs the native decoder too. */
const STACK_KIND_NAMES = DECODER_KINDS.filter((k) => k.external === undefined).map((k) => k.name)

/** `demo --decoder`: a kind the embedded stack starts itself. */
export function stackDecoderOption (v: string): DecoderEngine {
  if (STACK_KIND_NAMES.includes(v)) return v as DecoderEngine
  const why = findDecoderKind(v) === undefined ? '' : ' (pd-bridge does not start that decoder; serve bridges into a running one)'
  throw new InvalidArgumentError(`--decoder ${v}: expected ${kindNamesText(STACK_KIND_NAMES)}${why}`)
}

/** `--decoder`'s help: every kind and what it is. */
export const DECODER_OPTION_HELP = `the decoder kind: ${DECODER_KINDS.map((k) => `${k.name} (${k.summary})`).join('; ')}`

/** `--prefill-profile`'s default, in words: each kind's cache arithmetic. */
export const PREFILL_PROFILE_DEFAULT_HELP = `the decoder kind's cache arithmetic: ${DECODER_KINDS.map((k) => `${k.cacheMath} with ${k.name}`).join(', ')}`

/** The commander option key of a flag: `--omlx-cache-dir` -> `omlxCacheDir`. */
function optionKey (flag: string): string {
  return flag.replace(/^--/, '').replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase())
}

/** Every external kind's serve flags (its record's external.serveFlags), each with the kind that owns it. */
const EXTERNAL_SERVE_FLAGS = DECODER_KINDS.flatMap((k) => k.external === undefined ? [] : Object.values(k.external.serveFlags).map((f) => ({ kind: k, ...f })))

/**
 * Where the running decoder is, for a kind pd-bridge cannot start (its record's `external` part),
 * from its serve flags; undefined for a kind the stack runs. A missing flag, or another kind's flag,
 * is refused before any work.
 */
function externalDecoderFrom (opts: ServeOptions): { url: string, cacheDir: string, modelName: string } | undefined {
  const kind = decoderKind(opts.decoder, '--decoder')
  const given = (flag: string): string | undefined => opts[optionKey(flag)] as string | undefined
  const foreign = EXTERNAL_SERVE_FLAGS.filter((f) => f.kind !== kind && given(f.flag) !== undefined)
  if (foreign.length > 0) throw new ConfigError(foreign.map((f) => f.flag).join(', '), `only with --decoder ${foreign[0].kind.name}`)
  if (kind.external === undefined) return undefined
  const { cacheDir, url, modelName } = kind.external.serveFlags
  const missing = [cacheDir, url, modelName].filter((f) => given(f.flag) === undefined).map((f) => f.flag)
  if (missing.length > 0) throw new ConfigError(`--decoder ${kind.name}`, `needs ${missing.join(', ')} (${kind.external.docs})`)
  return { url: given(url.flag) as string, cacheDir: resolve(given(cacheDir.flag) as string), modelName: given(modelName.flag) as string }
}

/** The serve command. */
export const serveCommand = new Command('serve')
  .description('run the bridge: with no --config the embedded default (makes or reuses the checkpoint and sidecar, starts prefill engine, share, decoder and front door on 127.0.0.1); with --config the front door for that deployment. Ctrl-C stops everything')
  .option('--config <file>', 'a front door config (docs/configuration.md): serve only the front door, for engines that run elsewhere')
  .option('--state-dir <dir>', 'checkpoint, sidecar, captures, block store and logs (default $PD_STATE_DIR or ~/.cache/pd-bridge)')
  .option('--preset <name>', `embedded model: ${PRESET_NAMES.join(' | ')}`, presetOption, EMBEDDED_DEFAULTS.preset)
  .option('--seed <n>', 'seed of the embedded checkpoint', integerOption('--seed', 0, 2 ** 32 - 1), EMBEDDED_DEFAULTS.seed)
  .option('--block-size <n>', 'tokens per decoder block (a multiple of every pool ratio of the preset)', (t: string) => parseBlockSize(t), EMBEDDED_DEFAULTS.blockSize)
  .option('--prefill-profile <name>', `numerics profile of the embedded prefill engine (default: ${PREFILL_PROFILE_DEFAULT_HELP}), so bridged caches can be compared bit for bit`)
  .option('--decoder <engine>', DECODER_OPTION_HELP, decoderEngineOption, DEFAULT_DECODER_KIND.name)
for (const f of EXTERNAL_SERVE_FLAGS) serveCommand.option(`${f.flag} ${f.value}`, f.help)
serveCommand
  .option('--host <host>', 'interface of the embedded front door', EMBEDDED_DEFAULTS.host)
  .option('--port <n>', 'port of the embedded front door, 0 for any free one', integerOption('--port', 0, 65535), EMBEDDED_DEFAULTS.port)
  .action(async (opts: ServeOptions) => {
    // The front door alone (--config) runs no kernels here; the embedded stack does.
    if (opts.config === undefined) requireNativeKernels('serve')
    const externalDecoder = externalDecoderFrom(opts)
    if (externalDecoder !== undefined && opts.config !== undefined) throw new ConfigError('--config', `--decoder ${opts.decoder} with --config: set decoder.engine in the config instead`)
    const stateDir = resolveStateDir(opts.stateDir)
    const logger = pino({ base: { pid: process.pid, name: 'serve' }, timestamp: pino.stdTimeFunctions.isoTime },
      pino.destination({ dest: `${stateDir}/logs/serve.log`, mkdir: true, sync: true }))
    const say = (line: string): void => { process.stderr.write(`pd-bridge serve: ${line}\n`) }
    const onEvent = (e: StackEvent): void => {
      logger.info({ event: e }, e.kind)
      // One line per restart, when the child died; its return is in serve.log and the child's log.
      const line = e.kind === 'restarting' ? restartLine(e) : e.kind === 'restarted' ? undefined : describeStackEvent(e)
      if (line !== undefined) say(line)
    }
    const running = opts.config !== undefined
      ? await startFrontOnly({ config: opts.config, stateDir, onEvent })
      : await startEmbeddedStack({
        stateDir, preset: opts.preset, seed: opts.seed, blockSize: opts.blockSize, prefillProfile: opts.prefillProfile, host: opts.host, port: opts.port, onEvent,
        decoderEngine: opts.decoder as DecoderEngine, ...(externalDecoder !== undefined ? { externalDecoder } : {}),
      })
    // From here on a child that exits (any code, any signal) is started again on its port; only
    // one that keeps dying past the limit (the config's `restarts`), or SIGINT/SIGTERM to serve, stops the stack.
    running.supervisor.restartOnDeath(running.restarts)
    process.stdout.write(JSON.stringify({ event: 'ready', url: running.urls.front, pid: process.pid, state_dir: stateDir, logs: running.logDir, ...running.urls }) + '\n')
    say(`ready: point any OpenAI client at ${running.urls.front}/v1 (logs in ${running.logDir}); Ctrl-C stops everything`)
    const reason = await runUntilStopped(running.supervisor, running.stop, (r) => {
      logger.info({ reason: r }, 'stopping')
      say(r.kind === 'signal' ? `${r.signal}: stopping every process` : `${r.message}\nstopping every process`)
    })
    logger.info({ reason }, 'stopped')
    say('stopped')
    if (reason.kind === 'died') process.exitCode = 1
  })
