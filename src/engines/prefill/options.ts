// The engine's settings, checked once at start-up. Each problem is a ConfigError naming the flag.
import { ConfigError } from '../../errors.ts'

/** Settings of a prefill engine (the CLI flags, parsed). */
export interface PrefillEngineOptions {
  /** Checkpoint directory (config.json, weights, tokenizer.json). */
  model: string
  /** The decoder's exported sidecar directory the capture hook computes with. */
  sidecar: string
  /** Where capture directories are written (created if absent); one engine per root. */
  captureRoot: string
  /** Default 127.0.0.1. */
  host?: string
  /** Default 0 (any free port). */
  port?: number
  /** Numerics profile of the engine; default 'prefill'. */
  profile?: string
  /** Requests that may wait behind the running one; default 16. */
  maxQueue?: number
  /** Longest prompt accepted; default (and at most) the model's max_position_embeddings. */
  maxTokens?: number
  /** Default capture memory budget in bytes; a request may set its own. */
  memoryBudgetBytes?: number
  /**
   * Stream every capture (src/capture/spill.ts): boundary snapshots and pooled rows go to disk as
   * they are computed, so capture memory does not grow with the prompt; the files are the same.
   * Default false (staged in memory).
   */
  spillCapture?: boolean
  /** Tokens per engine call between event-loop turns; default 512. */
  maxChunk?: number
  /** Largest request body; default 1 MiB + 16 bytes per --max-tokens. */
  maxBodyBytes?: number
  /** Largest carry a warm-extended request may send (PUT /v1/carry/{id}); default 64 GiB. */
  maxCarryBytes?: number
  /** Where JSON log lines go (no trailing newline); default stderr. */
  log?: (line: string) => void
  /** PD_API_KEY: every route but a bare /health requires `Authorization: Bearer <key>`; absent: open. */
  apiKey?: string
}

/** PrefillEngineOptions with every default applied that does not need the model. */
export interface ResolvedOptions {
  model: string
  sidecar: string
  captureRoot: string
  host: string
  port: number
  profile: string
  maxQueue: number
  maxTokens?: number
  memoryBudgetBytes?: number
  spillCapture: boolean
  maxChunk: number
  maxBodyBytes?: number
  maxCarryBytes: number
  log: (line: string) => void
  apiKey?: string
}

function integer (flag: string, value: number | undefined, min: number, max = Number.MAX_SAFE_INTEGER): number | undefined {
  if (value === undefined) return undefined
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new ConfigError(flag, `must be an integer in [${min}, ${max}], got ${String(value)}`)
  }
  return value
}

function path (flag: string, value: unknown): string {
  if (typeof value !== 'string' || value === '') throw new ConfigError(flag, 'a directory is required')
  return value
}

/** Check options and apply the defaults that do not depend on the model. */
export function resolveOptions (o: PrefillEngineOptions): ResolvedOptions {
  return {
    model: path('--model', o.model),
    sidecar: path('--sidecar', o.sidecar),
    captureRoot: path('--capture-root', o.captureRoot),
    host: o.host ?? '127.0.0.1',
    port: integer('--port', o.port, 0, 65535) ?? 0,
    profile: o.profile ?? 'prefill',
    maxQueue: integer('--max-queue', o.maxQueue, 0) ?? 16,
    maxTokens: integer('--max-tokens', o.maxTokens, 1),
    memoryBudgetBytes: integer('--memory-budget', o.memoryBudgetBytes, 1),
    spillCapture: o.spillCapture === true,
    maxChunk: integer('--max-chunk', o.maxChunk, 1) ?? 512,
    maxBodyBytes: integer('--max-body-bytes', o.maxBodyBytes, 2),
    maxCarryBytes: integer('--max-carry-bytes', o.maxCarryBytes, 1) ?? 64 * 1024 ** 3,
    log: o.log ?? ((line: string) => { process.stderr.write(line + '\n') }),
    apiKey: o.apiKey,
  }
}
