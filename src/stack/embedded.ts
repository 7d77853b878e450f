// The embedded default: everything the bridge needs on one machine, each part a child process on
// 127.0.0.1 with port 0, wired through the URLs their ready lines print. Order: the files
// (checkpoint, sidecar), then prefill engine, share and decoder together (they need nothing from
// each other), then the front door, whose config names the other three.
import { cpus } from 'node:os'
import { mkdir, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { ENV_OVERRIDES } from '../config/index.ts'
import { checkBlockSize } from '../config/block-size.ts'
import { decoderKind, DEFAULT_DECODER_KIND } from '../decoders/registry.ts'
import { checkListenFree } from './listen-check.ts'
import { launchEnvText, readUserFrontSettings } from './front-settings.ts'
import { presetConfig, type PresetName } from '../model/checkpoint/index.ts'
import { ensureCheckpoint, ensureGguf, ensureSidecar, type CheckpointAsset, type GgufAsset, type SidecarAsset } from './assets.ts'
import { StackError } from './errors.ts'
import { isAlive, readStackRecord, removeStackRecord, writeStackRecord, type StackRecord } from './record.ts'
import { cacheDirFor, stackPaths, type StackPaths } from './state-dir.ts'
import { stackNumerics } from './stack-numerics.ts'
import type { ReadyInfo } from './ready-line.ts'
import { Supervisor, type RestartPolicy, type SupervisorEvent } from './supervisor.ts'
import { torchPrefillArgv, torchPrefillLabel, type TorchPrefillEngine } from './torch-prefill.ts'

/**
 * The decoder's numerics profile in the embedded default (the sidecar is exported under it): the
 * default kind's cache arithmetic. Another kind brings its own (its record's cacheMath).
 */
export const EMBEDDED_DECODER_PROFILE = DEFAULT_DECODER_KIND.cacheMath

/** Which decoder the stack runs: a decoder kind's name (src/decoders/registry.ts). */
export type DecoderEngine = string

/**
 * The prefill engine's profile in the embedded default: the decoder's own. The capture hook always
 * pools with the decoder's weights and arithmetic (the sidecar), but the attention inputs it pools
 * come from the prefill engine's forward; under the same profile they are the decoder's bit for
 * bit, so the bridged blocks and answers can be checked for identity. Under `prefill` (FP8 block
 * weights, another matmul order) they differ by rounding from layer 1 on, and so do the blocks.
 */
export const EMBEDDED_PREFILL_PROFILE = EMBEDDED_DECODER_PROFILE

/** Defaults of the embedded stack. */
export const EMBEDDED_DEFAULTS = {
  preset: 'tiny' as PresetName,
  seed: 1,
  /** Small blocks, so a prompt of a couple of thousand tokens on tiny spans several. */
  blockSize: 256,
  host: '127.0.0.1',
  port: 8012,
  readyTimeoutMs: 180_000,
  graceMs: 10_000,
}

/** Tokens of the window a bridged prompt leaves for its answer: the gate's default PD_MIN_ANSWER_TOKENS. */
export const EMBEDDED_ANSWER_ROOM = 256

/**
 * The largest request body the stack's front door and decoder accept: room for a prompt that fills
 * the served window as JSON text (32 bytes a token), and never below the servers' own 4 MiB default.
 * A 1M-token document is about 5 MB of text, over the default (docs/long-runs.md).
 */
export function embeddedBodyBytes (window: number): number {
  return Math.max(4 * 1024 * 1024, 32 * window)
}

/** What the stack reports while it starts: the supervisor's events plus the files it makes or reuses. */
export type StackEvent =
  | SupervisorEvent
  | { kind: 'asset', what: 'checkpoint' | 'sidecar' | 'gguf', dir: string, action: 'reusing' | 'making' | 'made' }

/** How to start the embedded stack. */
export interface EmbeddedStackOptions {
  stateDir: string
  /** Where this stack's running parts live (captures, store, logs, config, record); default stateDir (see stackPaths). */
  home?: string
  preset?: PresetName
  seed?: number
  blockSize?: number
  /** Where the front door listens (default 127.0.0.1:8012; 0 for any free port). */
  host?: string
  port?: number
  readyTimeoutMs?: number
  graceMs?: number
  /** The prefill engine's numerics profile (default EMBEDDED_PREFILL_PROFILE). */
  prefillProfile?: string
  /** Run transformers (src/engines/torch) as the prefill engine instead of ours; prefillProfile does not apply. */
  torchPrefill?: TorchPrefillEngine
  /** The decoder kind's name (default: the registry's default kind). */
  decoderEngine?: DecoderEngine
  /**
   * Where the running decoder is, required for (and only for) a kind the stack cannot start (its
   * record's `external` part, e.g. oMLX on a Mac): no decoder child is started; the front door forwards
   * to `url` and the bridge writes blocks into `cacheDir` (that decoder's own cache directory, mounted
   * here) under `modelName`.
   */
  externalDecoder?: { url: string, cacheDir: string, modelName: string }
  /** Routing thresholds for the front door (default: 2 blocks minimum, 1 block of uncached tail, the window minus room for an answer). */
  routing?: { minTokens?: number, minTail?: number, maxBridgeTokens?: number }
  /** The front door writes blocks while the engine runs (capture.streamBlocks; docs/front-door.md). */
  streamBlocks?: boolean
  onEvent?: (e: StackEvent) => void
  /** A child died while the stack was running (the caller stops the stack); with restarts on (serve), a child given up on after too many restarts. */
  onDeath?: (message: string) => void
}

/** A running embedded stack. */
export interface EmbeddedStack {
  paths: StackPaths
  checkpoint: CheckpointAsset
  sidecar: SidecarAsset
  /** Which decoder kind runs, its numerics profile (the sidecar's), and its GGUF when the kind needs one. */
  decoderEngine: DecoderEngine
  profile: string
  gguf?: GgufAsset
  /** The decoder's block store root. */
  cacheDir: string
  /** Where every child's log file is. */
  logDir: string
  /** The model id the decoder serves and hashes into block keys. */
  modelName: string
  blockSize: number
  /** The largest request body the front door and the decoder accept (embeddedBodyBytes, or front.json's). */
  maxBodyBytes: number
  urls: { prefill: string, share: string, decoder: string, front: string }
  /** What the prefill engine is: its numerics profile, or `transformers bf16 on cuda (GPU name)`. */
  prefillLabel: string
  /** The prefill engine's GPU, when it runs on one (the torch engine's ready line names it). */
  prefillGpu?: string
  supervisor: Supervisor
  /** How serve restarts the children: front.json's `restarts` and the PD_RESTART_* variables (docs/configuration.md). */
  restarts: RestartPolicy
  record: StackRecord
  /** The environment children get (PD_* front door overrides removed). */
  childEnv: NodeJS.ProcessEnv
  /** Stop every child (front door first) and remove the record. */
  stop: () => Promise<void>
}

/**
 * The environment for children: the user's, without the front door's PD_* overrides (the stack
 * writes the front door's config itself; a stray PD_PORT or PD_DECODER_URL in the shell must not
 * point it elsewhere) and without PD_STATE_DIR (children get explicit paths). PD_API_KEY (and PD_BLOCK_KEY) is
 * deliberately not an override and stays: every child (front door, prefill engine, share, decoder)
 * reads the one shared key from its own environment, requires it and sends it.
 */
export function childEnvironment (env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = { ...env }
  for (const o of ENV_OVERRIDES) delete out[o.name]
  delete out.PD_STATE_DIR
  return out
}

/** Refuse to start over a stack that is already running from this state directory. */
async function refuseIfRunning (recordPath: string, stateDir: string): Promise<void> {
  const r = await readStackRecord(recordPath)
  if (r === undefined || r.supervisorPid === process.pid) return
  // A record whose supervisor is gone (it was killed) describes nothing: drop it.
  if (!isAlive(r.supervisorPid)) return await rm(recordPath, { force: true })
  throw new StackError(
    `a stack is already running from ${stateDir} (pid ${r.supervisorPid}, front door ${r.frontUrl}); ` +
    'stop it first (Ctrl-C where it runs) or use another --state-dir / PD_STATE_DIR',
  )
}

/** Start the embedded stack; on any failure every child already started is stopped before the error is thrown. */
export async function startEmbeddedStack (options: EmbeddedStackOptions): Promise<EmbeddedStack> {
  const preset = options.preset ?? EMBEDDED_DEFAULTS.preset
  const seed = options.seed ?? EMBEDDED_DEFAULTS.seed
  const blockSize = options.blockSize ?? EMBEDDED_DEFAULTS.blockSize
  const emit = options.onEvent ?? (() => {})
  const kind = decoderKind(options.decoderEngine, '--decoder')
  const decoderEngine = kind.name
  const torchProblem = options.torchPrefill === undefined ? undefined : kind.stack.torchPrefillProblem?.(options.torchPrefill.dtype)
  if (torchProblem !== undefined) throw new StackError(torchProblem)
  const external = options.externalDecoder
  if (kind.external !== undefined && external === undefined) throw new StackError(`--decoder ${kind.name}: pd-bridge cannot start it; say where the running one is (${Object.values(kind.external.serveFlags).map((f) => f.flag).join(', ')}; ${kind.external.docs})`)
  if (kind.external === undefined && external !== undefined) throw new StackError(`--decoder ${kind.name}: the stack runs this decoder itself; an external decoder's location does not apply`)
  const { profile, cacheMath } = stackNumerics(kind)
  const plain = stackPaths(options.stateDir, preset, seed, profile, blockSize, options.home)
  // Where the kind says so, the checkpoint's indexer heads are mirrored: no top-k ties (its record says why).
  const mirrored = kind.stack.mirrorIndexerHeads
  // A sidecar under another cache math has its own folder: a profile-only sidecar is never reused for it.
  const sidecarDir = `${plain.sidecar}${cacheMath !== undefined ? `-${cacheMath}` : ''}${mirrored ? '-mirrored' : ''}`
  const paths = { ...plain, model: mirrored ? `${plain.model}-mirrored` : plain.model, sidecar: sidecarDir }
  const cfg = presetConfig(preset)
  checkBlockSize(blockSize, cfg.compressRatios, '--block-size', preset)
  // The external decoder's directory, model name and block size, checked before any work.
  if (external !== undefined) kind.external?.checkStore({ cacheDir: external.cacheDir, modelName: external.modelName, cfg, profile, blockSize })
  await mkdir(paths.stateDir, { recursive: true })
  await refuseIfRunning(paths.record, options.home ?? paths.stateDir)
  // Your front door settings (never written by the stack), checked before anything starts.
  const user = await readUserFrontSettings(paths.userFrontConfig)
  // The decoder takes every body the front door lets through (front.json's limits.maxBodyBytes may raise it).
  const userBody = (user.rest.limits as { maxBodyBytes?: number } | undefined)?.maxBodyBytes
  const maxBodyBytes = Math.max(embeddedBodyBytes(cfg.maxPositionEmbeddings), userBody ?? 0)
  const listen = {
    host: options.host ?? user.listen?.host ?? EMBEDDED_DEFAULTS.host,
    port: options.port ?? user.listen?.port ?? EMBEDDED_DEFAULTS.port,
  }
  // A busy front door port is found now, not after three children have started.
  await checkListenFree(listen.host, listen.port)

  emit({ kind: 'asset', what: 'checkpoint', dir: paths.model, action: 'making' })
  const checkpoint = await ensureCheckpoint(paths.model, preset, seed, { mirrorIndexerHeads: mirrored })
  emit({ kind: 'asset', what: 'checkpoint', dir: paths.model, action: checkpoint.made ? 'made' : 'reusing' })
  emit({ kind: 'asset', what: 'sidecar', dir: paths.sidecar, action: 'making' })
  const sidecar = await ensureSidecar(paths.sidecar, checkpoint, profile, blockSize, cacheMath)
  emit({ kind: 'asset', what: 'sidecar', dir: paths.sidecar, action: sidecar.made ? 'made' : 'reusing' })
  const name = `${preset}-seed${seed}${mirrored ? '-mirrored' : ''}`
  let gguf: GgufAsset | undefined
  if (kind.stack.needsGguf) {
    const path = join(paths.stateDir, 'models', `${name}.f32.gguf`)
    emit({ kind: 'asset', what: 'gguf', dir: path, action: 'making' })
    gguf = await ensureGguf(path, checkpoint)
    emit({ kind: 'asset', what: 'gguf', dir: path, action: gguf.made ? 'made' : 'reusing' })
  }

  // Two kinds' stores never share a folder.
  const cacheDir = cacheDirFor(paths, name, checkpoint.digest, kind.stack.storeLabel(profile), blockSize)
  const modelName = external?.modelName ?? `pd-bridge-${name}`
  // The share refuses a root that does not exist, and it starts alongside the engine that would make it.
  await mkdir(paths.captures, { recursive: true })
  const childEnv = childEnvironment()
  const readyTimeoutMs = options.readyTimeoutMs ?? EMBEDDED_DEFAULTS.readyTimeoutMs
  // A restarted child (serve restarts them: Supervisor.restartOnDeath) has a new pid: the record
  // (doctor's `processes` check) follows it. Its URL is the one it had: it listens on the same port.
  // Writes are chained (they share one temporary file), and stop waits for the last one.
  let running: StackRecord | undefined
  let recordWrite = Promise.resolve()
  const onEvent = (e: StackEvent): void => {
    emit(e)
    if (e.kind !== 'restarted' || running === undefined) return
    const r: StackRecord = running
    running = { ...r, processes: r.processes.map((p) => p.name === e.name ? { ...p, pid: e.pid, url: e.url } : p) }
    recordWrite = recordWrite.then(async () => await writeStackRecord(paths.record, running as StackRecord)).catch(() => {})
  }
  const supervisor = new Supervisor({ logDir: paths.logs, graceMs: options.graceMs ?? EMBEDDED_DEFAULTS.graceMs, onEvent })
  const common = { readyTimeoutMs, env: childEnv }
  try {
    const [prefill, share, decoder] = await allOrFirstFailure([
      options.torchPrefill !== undefined
        ? supervisor.start({ ...common, env: { ...childEnv, PYTHONUNBUFFERED: '1' }, name: 'prefill-engine', args: [], argv: torchPrefillArgv(options.torchPrefill, { model: checkpoint.dir, sidecar: sidecar.dir, captureRoot: paths.captures }) })
        : supervisor.start({ ...common, name: 'prefill-engine', args: ['prefill-engine', '--model', checkpoint.dir, '--sidecar', sidecar.dir, '--capture-root', paths.captures, '--profile', options.prefillProfile ?? profile, '--port', '0'] }),
      supervisor.start({ ...common, name: 'share', args: ['share', '--root', paths.captures, '--port', '0'] }),
      external !== undefined
        ? Promise.resolve<ReadyInfo>({ url: external.url, fields: {} })
        : supervisor.start({ ...common, name: 'decoder', args: decoderArgs({ decoderEngine, profile, checkpoint, gguf, blockSize, modelName, maxBodyBytes }, cacheDir) }),
    ])
    const frontConfig = {
      ...user.rest,
      limits: { maxBodyBytes, ...(user.rest.limits as Record<string, unknown> | undefined) },
      listen,
      decoder: { url: decoder.url, model: checkpoint.dir, modelName, profile, cacheDir: external?.cacheDir ?? cacheDir, blockSize, engine: decoderEngine, ...kind.stack.frontDecoderConfig },
      prefill: { url: prefill.url, ...user.prefill },
      share: { url: share.url },
      capture: { spoolDir: paths.spool, ...(options.streamBlocks === true ? { streamBlocks: true } : {}) },
      sidecar: sidecar.dir,
      routing: {
        minTokens: options.routing?.minTokens ?? user.routing?.minTokens ?? 2 * blockSize,
        minTail: options.routing?.minTail ?? user.routing?.minTail ?? blockSize,
        // A bridged prompt must leave the answer room in the window (the gate's PD_MIN_ANSWER_TOKENS).
        maxBridgeTokens: options.routing?.maxBridgeTokens ?? user.routing?.maxBridgeTokens ?? cfg.maxPositionEmbeddings - EMBEDDED_ANSWER_ROOM,
      },
    }
    await mkdir(join(paths.frontConfig, '..'), { recursive: true })
    await writeFile(paths.frontConfig, JSON.stringify(frontConfig, null, 2) + '\n')
    await writeFile(paths.launchFile, launchEnvText({ cfg, blockSize, profile, maxBridgeTokens: frontConfig.routing.maxBridgeTokens, prefillModel: checkpoint.dir }))
    const front = await supervisor.start({ ...common, name: 'front', args: ['front', '--config', paths.frontConfig] })
    const record: StackRecord = {
      format: 'pd-bridge-stack/1',
      supervisorPid: process.pid,
      startedAt: new Date().toISOString(),
      preset,
      seed,
      stateDir: paths.stateDir,
      frontConfig: paths.frontConfig,
      frontUrl: front.url,
      processes: supervisor.started.map((c) => ({ name: c.spec.name, pid: c.pid ?? -1, url: c.ready?.url ?? '', log: c.logPath })),
    }
    await writeStackRecord(paths.record, record)
    running = record
    const stop = async (): Promise<void> => {
      await supervisor.stopAll()
      await recordWrite
      await removeStackRecord(paths.record, process.pid)
    }
    supervisor.onDeath((_child, message) => options.onDeath?.(message))
    const gpu = typeof prefill.fields.device_name === 'string' && prefill.fields.device_name !== '' ? prefill.fields.device_name : undefined
    return {
      paths, checkpoint, sidecar, decoderEngine, profile, ...(gguf !== undefined ? { gguf } : {}), cacheDir: external?.cacheDir ?? cacheDir, logDir: paths.logs, modelName, blockSize, maxBodyBytes,
      urls: { prefill: prefill.url, share: share.url, decoder: decoder.url, front: front.url },
      prefillLabel: options.torchPrefill !== undefined ? torchPrefillLabel(options.torchPrefill, gpu) : options.prefillProfile ?? profile,
      ...(options.torchPrefill !== undefined && gpu !== undefined && options.torchPrefill.device !== 'cpu' ? { prefillGpu: gpu } : {}),
      supervisor, restarts: user.restarts, record, childEnv, stop,
    }
  }
  catch (err) {
    await supervisor.stopAll()
    throw err
  }
}

/**
 * Promise.all that fails at the first failure without leaving the others' later rejections
 * unhandled (the caller stops the stack, which makes the other starts fail too).
 */
async function allOrFirstFailure<T> (promises: Array<Promise<T>>): Promise<T[]> {
  for (const p of promises) p.catch(() => {})
  return await Promise.all(promises)
}

/** The decoder's CPU threads in the embedded stack: every core, what our kernels use by default (src/kernels setThreads). */
export function decoderThreads (): number {
  return Math.min(256, Math.max(1, cpus().length))
}

/**
 * How records name the stack's decoder (verify/results/environment.ts EmbeddedConfig.decoder): its
 * kind's environmentLabel on the stack's threads; undefined for a kind that has none (ours).
 */
export function decoderLabel (stack: Pick<EmbeddedStack, 'decoderEngine'>): string | undefined {
  return decoderKind(stack.decoderEngine).stack.environmentLabel?.(decoderThreads())
}

/** What a decoder child of the stack is started with: its kind's flags (profile, GGUF, threads...), then the checkpoint, store, block size and limits. */
function decoderArgs (d: Pick<EmbeddedStack, 'decoderEngine' | 'profile' | 'checkpoint' | 'gguf' | 'blockSize' | 'modelName' | 'maxBodyBytes'>, cacheDir: string): string[] {
  const kind = decoderKind(d.decoderEngine)
  // As many threads as ours uses by default (the machine's cores), so decoders compare on equal terms.
  const own = kind.stack.decoderArgs({ profile: d.profile, threads: decoderThreads(), ...(d.gguf !== undefined ? { gguf: d.gguf.path } : {}) })
  return ['decoder', '--engine', kind.name, ...own, '--model', d.checkpoint.dir, '--cache-dir', cacheDir, '--block-size', String(d.blockSize), '--port', '0',
    '--model-name', d.modelName, '--max-body-bytes', String(d.maxBodyBytes)]
}

/**
 * Start, under the stack's supervisor, a second decoder beside it: same checkpoint, profile, block
 * size and model name, but its own (empty) block store at `cacheDir`. The decoder-alone leg of the
 * demo and the protocols: the same prompt without any bridged blocks.
 */
export async function startNativeDecoder (stack: EmbeddedStack, cacheDir: string, readyTimeoutMs = EMBEDDED_DEFAULTS.readyTimeoutMs): Promise<ReadyInfo> {
  return await stack.supervisor.start({
    name: 'decoder-native',
    args: decoderArgs(stack, cacheDir),
    env: stack.childEnv,
    readyTimeoutMs,
  })
}

/** A decoder-alone leg with its own block store under the stack's state dir. */
export interface NativeLeg {
  url: string
  /** Its block store. */
  cacheDir: string
  /** Delete the store's run directory (the decoder must be stopped first). */
  remove: () => Promise<void>
}

/** startNativeDecoder with a fresh store at <state>/runs/<label>-<time>/native-cache, for a protocol run. */
export async function startNativeLeg (stack: EmbeddedStack, label: string): Promise<NativeLeg> {
  const runDir = join(stack.paths.stateDir, 'runs', `${label}-${Date.now()}`)
  const cacheDir = join(runDir, 'native-cache')
  await mkdir(cacheDir, { recursive: true })
  const ready = await startNativeDecoder(stack, cacheDir)
  return { url: ready.url, cacheDir, remove: async () => { await rm(runDir, { recursive: true, force: true }) } }
}

/** The log file of a named child under `paths`. */
export function logPathOf (paths: StackPaths, name: string): string {
  return join(paths.logs, `${name}.log`)
}
