// The launch parameters: the first of the four places the window lives in. They are what an
// operator passes when starting the engines (the seed's PD_MAX_MODEL_LEN, PD_ROPE_FACTOR, ...),
// written as an env file (KEY=VALUE, comments allowed) or a JSON object with the same keys. Every
// number that is sized against the window is a key here, so the gate can check it against the window.
import { readFile } from 'node:fs/promises'
import { ConfigError } from '../../src/errors.ts'
import { parseEnvFile } from './env-file.ts'

type Kind = 'int' | 'number' | 'bool' | 'string'

/** One launch key: its name, type, default, and what it means (docs/window-gate.md lists them all). */
export interface LaunchKeySpec {
  key: string
  kind: Kind
  required?: boolean
  meaning: string
}

/** Every launch key the gate knows, besides the PD_DEADLINE_<STAGE>_MS family. */
export const LAUNCH_KEYS: readonly LaunchKeySpec[] = [
  { key: 'PD_MAX_MODEL_LEN', kind: 'int', required: true, meaning: 'the served window in tokens (prompt plus answer); the rope tables must cover exactly this' },
  { key: 'PD_ROPE_FACTOR', kind: 'number', required: true, meaning: 'YaRN factor of the compressed (CSA/HCA) layers\' rope' },
  { key: 'PD_ORIGINAL_MAX_POS', kind: 'int', required: true, meaning: 'YaRN original_max_position_embeddings (the native window)' },
  { key: 'PD_ROPE_THETA', kind: 'number', meaning: 'rope theta of the sliding layers (default: the prefill node\'s config.json)' },
  { key: 'PD_COMPRESS_ROPE_THETA', kind: 'number', meaning: 'rope theta of the compressed layers (default: the prefill node\'s config.json)' },
  { key: 'PD_ROPE_BETA_FAST', kind: 'number', meaning: 'YaRN beta_fast (default: the prefill node\'s config.json)' },
  { key: 'PD_ROPE_BETA_SLOW', kind: 'number', meaning: 'YaRN beta_slow (default: the prefill node\'s config.json)' },
  { key: 'PD_DECODER_PROFILE', kind: 'string', meaning: 'the decoder\'s numerics profile (default: the sidecar\'s)' },
  { key: 'PD_PREFILL_MODEL', kind: 'string', meaning: 'the prefill engine\'s checkpoint directory, whose config.json is the second place (the default for --prefill-config)' },
  { key: 'PD_MAX_BRIDGE_TOKENS', kind: 'int', meaning: 'longest prompt the front door sends through the bridge' },
  { key: 'PD_PREFILL_MAX_MODEL_LEN', kind: 'int', meaning: 'longest prompt the prefill engine accepts' },
  { key: 'PD_PREFILL_MAX_BATCHED_TOKENS', kind: 'int', meaning: 'tokens the prefill engine runs in one batch' },
  { key: 'PD_PREFILL_CHUNKED', kind: 'bool', meaning: 'whether the prefill engine splits a prompt into batches (default true)' },
  { key: 'PD_DECODER_MAX_CONTEXT', kind: 'int', meaning: 'the decoder\'s max context (prompt plus answer)' },
  { key: 'PD_DEFAULT_MAX_TOKENS', kind: 'int', meaning: 'answer budget of a request that does not set max_tokens' },
  { key: 'PD_MIN_ANSWER_TOKENS', kind: 'int', meaning: 'the smallest answer budget the gate accepts (default 256)' },
  { key: 'PD_CAPTURE_BUDGET_BYTES', kind: 'int', meaning: 'capture hook memory budget per request' },
  { key: 'PD_STORE_MAX_BYTES', kind: 'int', meaning: 'size limit of the decoder\'s block store (LRU eviction past it)' },
  { key: 'PD_BLOCK_SIZE', kind: 'int', meaning: 'tokens per block of the decoder\'s block store' },
  { key: 'PD_PREFILL_TOKENS_PER_S', kind: 'number', meaning: 'measured prefill throughput at long prompts' },
  { key: 'PD_DEADLINE_MARGIN', kind: 'number', meaning: 'how many times the expected full-window prefill time a deadline must allow (default 1.5)' },
]

/** Stage deadlines: PD_DEADLINE_<STAGE>_MS, any stage name. */
export const DEADLINE_KEY = /^PD_DEADLINE_([A-Z0-9_]+)_MS$/

/**
 * The stage deadlines that contain a whole prefill at the full window, so must allow for it: the
 * prefill engine's request, the capture (prefill plus transfer), the whole bridge, and the bridge
 * queue (a queued request waits at least for the running bridge). Other stages (submit, write,
 * rescan, decoder idle, ...) are not sized by the prefill time and are not checked against it.
 */
export const WINDOW_SIZED_DEADLINES: readonly string[] = ['PD_DEADLINE_PREFILL_MS', 'PD_DEADLINE_CAPTURE_MS', 'PD_DEADLINE_BRIDGE_MS', 'PD_DEADLINE_QUEUE_MS']

/** Defaults of the optional keys that have one. */
export const LAUNCH_DEFAULTS = { minAnswerTokens: 256, deadlineMargin: 1.5, prefillChunked: true } as const

/** The launch parameters, parsed and typed. Optional keys that are not set are undefined. */
export interface LaunchParams {
  /** The file they were read from. */
  file: string
  maxModelLen: number
  ropeFactor: number
  originalMaxPos: number
  ropeTheta?: number
  compressRopeTheta?: number
  betaFast?: number
  betaSlow?: number
  decoderProfile?: string
  prefillModel?: string
  maxBridgeTokens?: number
  prefillMaxModelLen?: number
  prefillMaxBatchedTokens?: number
  prefillChunked: boolean
  decoderMaxContext?: number
  defaultMaxTokens?: number
  minAnswerTokens: number
  captureBudgetBytes?: number
  storeMaxBytes?: number
  blockSize?: number
  prefillTokensPerS?: number
  deadlineMargin: number
  /** PD_DEADLINE_<STAGE>_MS keys and their values in milliseconds. */
  deadlinesMs: Record<string, number>
  /** PD_ keys the gate does not know (a typo, or a key for another tool): reported, not fatal. */
  unknownKeys: string[]
  /** Which keys were set (so a default can be told from a value). */
  setKeys: Set<string>
  /** Where each set key's value came from: this file and the key, or another file's field (--config). */
  origins: Record<string, { file: string, field: string }>
}

/** Where a launch key's value came from (the launch file and the key itself when it was not set elsewhere). */
export function originOf (launch: LaunchParams, key: string): { file: string, field: string } {
  return launch.origins[key] ?? { file: launch.file, field: key }
}

// A key's value as written, before typing.
type RawValue = string | number | boolean

function typed (key: string, kind: Kind, raw: RawValue, file: string): number | string | boolean {
  const bad = (expected: string): never => { throw new ConfigError(key, `expected ${expected}, found ${JSON.stringify(raw)}`, file) }
  if (kind === 'string') {
    if (typeof raw !== 'string' || raw === '') bad('a non-empty string')
    return raw
  }
  if (kind === 'bool') {
    if (typeof raw === 'boolean') return raw
    const s = String(raw).toLowerCase()
    if (['1', 'true', 'yes', 'on'].includes(s)) return true
    if (['0', 'false', 'no', 'off'].includes(s)) return false
    return bad('a boolean (1/0, true/false, yes/no, on/off)')
  }
  // Numbers may be written with _ separators (2_097_152), as in the docs.
  const n = typeof raw === 'number' ? raw : /^[+]?(\d[\d_]*)(\.\d+)?([eE][+-]?\d+)?$/.test(String(raw).trim()) ? Number(String(raw).trim().replace(/_/g, '')) : NaN
  if (kind === 'int') {
    if (!Number.isSafeInteger(n) || n < 1) bad('a positive integer')
  } else if (!Number.isFinite(n) || n <= 0) {
    bad('a positive number')
  }
  return n
}

function rawEntries (text: string, file: string): Map<string, RawValue> {
  if (text.trimStart().startsWith('{')) {
    let json: unknown
    try {
      json = JSON.parse(text)
    }
    catch (e) {
      throw new ConfigError('(json)', `not valid JSON: ${(e as Error).message}`, file)
    }
    if (json === null || typeof json !== 'object' || Array.isArray(json)) throw new ConfigError('(root)', 'expected a JSON object of launch keys', file)
    const out = new Map<string, RawValue>()
    for (const [key, value] of Object.entries(json as Record<string, unknown>)) {
      if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') {
        throw new ConfigError(key, `expected a string, number or boolean, found ${JSON.stringify(value)}`, file)
      }
      out.set(key, value)
    }
    return out
  }
  return new Map([...parseEnvFile(text, file)].map(([k, e]) => [k, e.value]))
}

/** The LaunchParams field each key sets. */
export const LAUNCH_FIELD: Readonly<Record<string, keyof LaunchParams>> = {
  PD_MAX_MODEL_LEN: 'maxModelLen',
  PD_ROPE_FACTOR: 'ropeFactor',
  PD_ORIGINAL_MAX_POS: 'originalMaxPos',
  PD_ROPE_THETA: 'ropeTheta',
  PD_COMPRESS_ROPE_THETA: 'compressRopeTheta',
  PD_ROPE_BETA_FAST: 'betaFast',
  PD_ROPE_BETA_SLOW: 'betaSlow',
  PD_DECODER_PROFILE: 'decoderProfile',
  PD_PREFILL_MODEL: 'prefillModel',
  PD_MAX_BRIDGE_TOKENS: 'maxBridgeTokens',
  PD_PREFILL_MAX_MODEL_LEN: 'prefillMaxModelLen',
  PD_PREFILL_MAX_BATCHED_TOKENS: 'prefillMaxBatchedTokens',
  PD_PREFILL_CHUNKED: 'prefillChunked',
  PD_DECODER_MAX_CONTEXT: 'decoderMaxContext',
  PD_DEFAULT_MAX_TOKENS: 'defaultMaxTokens',
  PD_MIN_ANSWER_TOKENS: 'minAnswerTokens',
  PD_CAPTURE_BUDGET_BYTES: 'captureBudgetBytes',
  PD_STORE_MAX_BYTES: 'storeMaxBytes',
  PD_BLOCK_SIZE: 'blockSize',
  PD_PREFILL_TOKENS_PER_S: 'prefillTokensPerS',
  PD_DEADLINE_MARGIN: 'deadlineMargin',
}

/**
 * Parse launch parameters from text (env-file syntax, or a JSON object when the text starts with
 * `{`). Keys not starting with PD_ are ignored (an env file holds other settings too); unknown PD_
 * keys are listed in `unknownKeys`. A missing required key or a badly typed value is a ConfigError
 * naming the file and the key.
 */
export function parseLaunchParams (text: string, file: string): LaunchParams {
  const raw = rawEntries(text, file)
  const out: Record<string, unknown> = {
    file,
    minAnswerTokens: LAUNCH_DEFAULTS.minAnswerTokens,
    deadlineMargin: LAUNCH_DEFAULTS.deadlineMargin,
    prefillChunked: LAUNCH_DEFAULTS.prefillChunked,
    deadlinesMs: {},
    unknownKeys: [],
    setKeys: new Set<string>(),
    origins: {},
  }
  const specs = new Map(LAUNCH_KEYS.map((s) => [s.key, s]))
  for (const [key, value] of raw) {
    if (!key.startsWith('PD_')) continue
    const spec = specs.get(key)
    if (spec !== undefined) {
      out[LAUNCH_FIELD[key]] = typed(key, spec.kind, value, file)
      ;(out.setKeys as Set<string>).add(key)
      ;(out.origins as LaunchParams['origins'])[key] = { file, field: key }
    } else if (DEADLINE_KEY.test(key)) {
      (out.deadlinesMs as Record<string, number>)[key] = typed(key, 'int', value, file) as number
      ;(out.setKeys as Set<string>).add(key)
      ;(out.origins as LaunchParams['origins'])[key] = { file, field: key }
    } else {
      (out.unknownKeys as string[]).push(key)
    }
  }
  for (const spec of LAUNCH_KEYS) {
    if (spec.required === true && !raw.has(spec.key)) throw new ConfigError(spec.key, `missing: a required launch key (${spec.meaning})`, file)
  }
  return out as unknown as LaunchParams
}

/** Read and parse a launch file; an unreadable file is a ConfigError naming it. */
export async function loadLaunchParams (file: string): Promise<LaunchParams> {
  let text: string
  try {
    text = await readFile(file, 'utf8')
  }
  catch (e) {
    throw new ConfigError('(file)', `cannot be read: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`, file)
  }
  return parseLaunchParams(text, file)
}
