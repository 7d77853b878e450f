// `pd-bridge demo`, end to end: start the embedded stack plus a second decoder with an empty
// block store, build a fresh-seed prompt, send it bridged (front door) and native (second
// decoder), compare the answers and the blocks, stop everything, print the table.
//
// Why a second decoder for the native leg: the bridged leg leaves the prompt's blocks in the first
// decoder's store, so the same prompt sent there again would be a cache hit, and a varied prompt
// would have other tokens, another answer and other blocks, so nothing could be compared. A second
// decoder process on the same checkpoint, profile, block size and model name, with a store of its
// own that starts empty, prefills the same tokens itself: its answer is the native answer and the
// blocks it writes are exactly what the bridge should have written. The legs run one after the
// other on the same machine, so neither competes with the other for the CPU.
import { mkdir, readdir, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { loadTokenizer } from '../../model/tokenizer/index.ts'
import type { PresetName } from '../../model/checkpoint/index.ts'
import { StackError } from '../errors.ts'
import { describeStackEvent } from '../describe.ts'
import { blockKeyChain } from '../../decode/store/index.ts'
import type { DemoChecks } from '../../decoders/demo-checks.ts'
import { decoderKind } from '../../decoders/registry.ts'
import { EMBEDDED_DEFAULTS, startEmbeddedStack, startNativeDecoder, type DecoderEngine, type EmbeddedStack } from '../embedded.ts'
import { chatBody, runLeg, sameAnswer } from './legs.ts'
import { Progress, type ProgressStream } from './progress.ts'
import { buildDemoPrompt, freshSeed } from './prompt.ts'
import { demoPassed, renderDemoTable, type DemoSummary } from './table.ts'

/** Demo settings. */
export interface DemoOptions {
  stateDir: string
  preset?: PresetName
  /** The checkpoint's seed (the embedded model), not the prompt's. */
  seed?: number
  blockSize?: number
  /** The prefill engine's numerics profile (default: the decoder's, so bridge and native can be identical). */
  prefillProfile?: string
  /** Prompt length to aim for (default 1536). */
  tokens?: number
  /** Answer length (default 32). */
  maxTokens?: number
  /** The prompt's seed (default: a fresh random one). */
  promptSeed?: number
  /** Where progress goes (stderr in the CLI). */
  progress: ProgressStream
  readyTimeoutMs?: number
  /** Deadline of each leg's request (default 15 min). */
  legTimeoutMs?: number
  /** Demo runs kept under <state>/runs (default 3). */
  keepRuns?: number
  /** The decoder kind's name (default: the registry's default). */
  decoder?: DecoderEngine
}

/** The demo's result: the table and whether it passed. */
export interface DemoResult {
  summary: DemoSummary
  table: string
  passed: boolean
}

/** Defaults of the demo. */
export const DEMO_DEFAULTS = { tokens: 1536, maxTokens: 32, legTimeoutMs: 900_000, keepRuns: 3 }

async function pruneRuns (runsDir: string, keep: number): Promise<void> {
  const runs = (await readdir(runsDir).catch(() => [] as string[])).filter((d) => d.startsWith('demo-')).sort()
  for (const old of runs.slice(0, Math.max(0, runs.length - keep))) await rm(join(runsDir, old), { recursive: true, force: true })
}

/** Run the demo. Throws a StackError (after stopping everything) when a step cannot be done at all. */
export async function runDemo (o: DemoOptions): Promise<DemoResult> {
  const progress = new Progress(o.progress)
  const preset = o.preset ?? EMBEDDED_DEFAULTS.preset
  const seed = o.seed ?? EMBEDDED_DEFAULTS.seed
  const blockSize = o.blockSize ?? EMBEDDED_DEFAULTS.blockSize
  const legTimeoutMs = o.legTimeoutMs ?? DEMO_DEFAULTS.legTimeoutMs
  const promptSeed = o.promptSeed ?? freshSeed()
  const runId = `demo-${new Date().toISOString().replace(/[:.]/g, '-')}-${promptSeed}`
  const runDir = join(o.stateDir, 'runs', runId)
  const kind = decoderKind(o.decoder, '--decoder')
  const decoder = kind.name

  let stack: EmbeddedStack | undefined
  let died: ((err: Error) => void) | undefined
  const death = new Promise<never>((_resolve, reject) => { died = reject })
  death.catch(() => {})
  // A child dying mid-demo fails the step in progress at once instead of waiting for a timeout.
  const guarded = async <T>(work: Promise<T>): Promise<T> => await Promise.race([work, death])

  // Ctrl-C: stop every process, then leave with 130 like any interrupted command.
  const onSignal = (signal: NodeJS.Signals): void => {
    progress.end(true)
    progress.note(`${signal}: stopping every process`)
    process.once('SIGINT', () => { stack?.supervisor.killAllNow(); process.exit(130) })
    void (stack?.stop() ?? Promise.resolve()).finally(() => process.exit(130))
  }
  process.once('SIGINT', onSignal)
  process.once('SIGTERM', onSignal)

  try {
    progress.begin(`starting the embedded stack (${preset}, blocks of ${blockSize}) in ${o.stateDir}`)
    stack = await startEmbeddedStack({
      stateDir: o.stateDir,
      // A stack of its own (captures, store, logs, record) inside the run: the demo never meets a
      // `serve` running from the same state dir, nor another demo.
      home: join(runDir, 'stack'),
      preset,
      seed,
      blockSize,
      prefillProfile: o.prefillProfile,
      decoderEngine: decoder,
      port: 0,
      readyTimeoutMs: o.readyTimeoutMs,
      onEvent: (e) => {
        if (e.kind === 'asset' && e.action === 'making') return progress.update(`${e.what === 'checkpoint' ? 'making or checking the checkpoint' : 'exporting or checking the sidecar'}`)
        if (e.kind === 'starting') return progress.update(`starting ${e.name}`)
        if (e.kind === 'stopping' || e.kind === 'stopped') return
        const line = describeStackEvent(e)
        if (line !== undefined) progress.note(line)
      },
      onDeath: (message) => died?.(new StackError(message)),
    })
    const s = stack
    progress.begin('starting a second decoder with an empty block store for the native leg')
    const nativeStore = join(runDir, 'native-cache')
    await mkdir(runDir, { recursive: true })
    const native = await guarded(startNativeDecoder(s, nativeStore, o.readyTimeoutMs))
    progress.note(`native leg's decoder at ${native.url}, block store ${nativeStore}`)

    progress.begin(`building a fresh prompt of about ${o.tokens ?? DEMO_DEFAULTS.tokens} tokens (seed ${promptSeed})`)
    const tokenizer = await loadTokenizer(s.checkpoint.dir)
    const prompt = buildDemoPrompt(tokenizer, o.tokens ?? DEMO_DEFAULTS.tokens, promptSeed)
    const keys = blockKeyChain(s.modelName, prompt.tokens, blockSize)
    const warm = await kind.demo.present(s.cacheDir, keys)
    if (warm.length > 0) {
      throw new StackError(`the prompt of seed ${promptSeed} is already in the decoder's store (${warm.length} of ${keys.length} blocks): a bridged leg would be a cache hit, not a cold prompt. Leave out --prompt-seed for a fresh one`)
    }
    progress.note(`prompt: ${prompt.tokens.length} tokens, ${keys.length} full blocks, none of them stored yet`)
    const body = chatBody(s.modelName, prompt.messages, o.maxTokens ?? DEMO_DEFAULTS.maxTokens)

    progress.begin(`bridged leg: ${prompt.tokens.length} tokens through the front door (prefill engine, share, block writer, decoder)`)
    const bridged = await guarded(runLeg('bridged', s.urls.front, body, legTimeoutMs))
    progress.note(`bridged: ${bridged.verdict ?? '(no verdict)'} in ${(bridged.ms / 1000).toFixed(2)} s, cached_tokens ${bridged.cachedTokens}`)

    progress.begin(`native leg: the same ${prompt.tokens.length} tokens on the second decoder`)
    const nativeLeg = await guarded(runLeg('native', native.url, body, legTimeoutMs))
    progress.note(`native: ${(nativeLeg.ms / 1000).toFixed(2)} s, cached_tokens ${nativeLeg.cachedTokens}`)

    const boundary = typeof bridged.bridge?.bridged_tokens === 'number' ? bridged.bridge.bridged_tokens : 0
    progress.begin(`the prompt's cache (${keys.length} full blocks, ${boundary} tokens bridged): bridge-written vs the native decoder's`)
    const checks: DemoChecks = await kind.demo.compare({
      bridgedStore: s.cacheDir, nativeStore, modelName: s.modelName, tokens: prompt.tokens, blockSize, keys, bridgedTokens: boundary, checkpointDir: s.checkpoint.dir, workDir: runDir,
    })
    progress.note(kind.demo.rows(checks)[0].join(': '))

    progress.begin('stopping every process')
    await s.stop()
    progress.end()
    await pruneRuns(join(o.stateDir, 'runs'), o.keepRuns ?? DEMO_DEFAULTS.keepRuns)

    if (bridged.promptTokens !== prompt.tokens.length || nativeLeg.promptTokens !== prompt.tokens.length) {
      throw new StackError(`prompt token counts disagree: built ${prompt.tokens.length}, front door ${bridged.promptTokens}, native decoder ${nativeLeg.promptTokens}`)
    }
    const summary: DemoSummary = {
      preset, checkpointSeed: seed, blockSize, promptSeed,
      prefillProfile: o.prefillProfile ?? kind.cacheMath,
      promptTokens: prompt.tokens.length,
      codeWord: prompt.codeWord,
      bridged,
      native: nativeLeg,
      answersMatch: sameAnswer(bridged, nativeLeg),
      decoder,
      ...checks,
    }
    return { summary, table: renderDemoTable(summary), passed: demoPassed(summary) }
  }
  catch (err) {
    progress.end(true)
    await stack?.stop()
    throw err
  }
  finally {
    process.off('SIGINT', onSignal)
    process.off('SIGTERM', onSignal)
  }
}
