// PD_* environment overrides of the front door's config: one table naming each variable, the
// config key it sets and how its text is read. Variables win over the file, so a deployment can
// point one config at other engines without editing it.
import { ConfigError } from '../errors.ts'

/** How a variable's text becomes a value. */
type Kind = 'string' | 'integer' | 'boolean'

/** One PD_* variable. */
export interface EnvOverride {
  /** The variable's name. */
  name: string
  /** The config key it sets, as a dotted path (`routing.minTokens`). */
  key: string
  kind: Kind
  /** One line for the docs and `--help`. */
  help: string
}

/** Every variable the front door reads, in documentation order. */
export const ENV_OVERRIDES: readonly EnvOverride[] = [
  { name: 'PD_HOST', key: 'listen.host', kind: 'string', help: 'interface the front door listens on' },
  { name: 'PD_PORT', key: 'listen.port', kind: 'integer', help: 'port the front door listens on (0: any free one)' },
  { name: 'PD_DECODER_URL', key: 'decoder.url', kind: 'string', help: "the decoder's base URL" },
  { name: 'PD_MODEL', key: 'decoder.model', kind: 'string', help: "the decoder's checkpoint directory (config.json, tokenizer.json)" },
  { name: 'PD_MODEL_NAME', key: 'decoder.modelName', kind: 'string', help: 'the model name in block keys (default: asked from the decoder)' },
  { name: 'PD_DECODER_ENGINE', key: 'decoder.engine', kind: 'string', help: 'which decoder kind (docs/decoder-kinds.md), so which store the bridge writes' },
  { name: 'PD_KV_CACHE_TYPE', key: 'decoder.kvCacheType', kind: 'string', help: "F32 or F16: the llama.cpp decoder's K cache type" },
  { name: 'PD_PROFILE', key: 'decoder.profile', kind: 'string', help: "the decoder's numerics profile" },
  { name: 'PD_CACHE_DIR', key: 'decoder.cacheDir', kind: 'string', help: "the decoder's block store root" },
  { name: 'PD_BLOCK_SIZE', key: 'decoder.blockSize', kind: 'integer', help: 'tokens per block' },
  { name: 'PD_PREFILL_URL', key: 'prefill.url', kind: 'string', help: "the prefill engine's base URL" },
  { name: 'PD_MEMORY_BUDGET_BYTES', key: 'prefill.memoryBudgetBytes', kind: 'integer', help: 'capture memory budget per request' },
  { name: 'PD_SHARE_URL', key: 'share.url', kind: 'string', help: "the capture share's base URL" },
  { name: 'PD_CAPTURE_DIR', key: 'capture.dir', kind: 'string', help: "the prefill engine's capture root, read directly when there is no share" },
  { name: 'PD_SPOOL_DIR', key: 'capture.spoolDir', kind: 'string', help: 'where streamed captures are spooled' },
  { name: 'PD_CAPTURE_RETAIN', key: 'capture.retain', kind: 'string', help: 'none, failed or all: which verified captures stay on the prefill side' },
  { name: 'PD_STREAM_BLOCKS', key: 'capture.streamBlocks', kind: 'boolean', help: 'true or false: write blocks while the engine runs, from the segments it publishes' },
  { name: 'PD_SIDECAR', key: 'sidecar', kind: 'string', help: "the decoder's sidecar directory" },
  { name: 'PD_MIN_TOKENS', key: 'routing.minTokens', kind: 'integer', help: 'shorter prompts go straight to the decoder' },
  { name: 'PD_MIN_TAIL', key: 'routing.minTail', kind: 'integer', help: 'prompts with fewer uncached tokens go straight to the decoder' },
  { name: 'PD_MAX_BRIDGE_TOKENS', key: 'routing.maxBridgeTokens', kind: 'integer', help: 'longer prompts are never bridged' },
  { name: 'PD_QUEUE_MAX', key: 'queue.maxWaiting', kind: 'integer', help: 'bridges that may wait behind the running one' },
  { name: 'PD_CONCURRENT_BRIDGES', key: 'queue.concurrentBridges', kind: 'integer', help: 'bridges that run at once (their writes overlap the next prefill)' },
  { name: 'PD_QUEUE_WHEN_FULL', key: 'queue.whenFull', kind: 'string', help: 'native (serve natively) or reject (429) when the bridge queue is full' },
  { name: 'PD_DEADLINE_QUEUE_MS', key: 'deadlines.queueMs', kind: 'integer', help: 'bridge queue wait' },
  { name: 'PD_DEADLINE_SUBMIT_MS', key: 'deadlines.submitMs', kind: 'integer', help: 'prefill submit until accepted' },
  { name: 'PD_DEADLINE_CAPTURE_MS', key: 'deadlines.captureMs', kind: 'integer', help: 'engine prefill and capture transfer' },
  { name: 'PD_DEADLINE_WRITE_MS', key: 'deadlines.writeMs', kind: 'integer', help: 'block write and verification' },
  { name: 'PD_DEADLINE_RESCAN_MS', key: 'deadlines.rescanMs', kind: 'integer', help: "the decoder's cache rescan" },
  { name: 'PD_DEADLINE_STALL_MS', key: 'deadlines.stallMs', kind: 'integer', help: "no bytes from the share, or no change in the capture's engine status, for this long" },
  { name: 'PD_DEADLINE_ENGINE_STALL_MS', key: 'deadlines.engineStallMs', kind: 'integer', help: "the engine's progress deadline, when it must differ from PD_DEADLINE_STALL_MS" },
  { name: 'PD_DEADLINE_BRIDGE_MS', key: 'deadlines.bridgeMs', kind: 'integer', help: 'the whole bridge' },
  { name: 'PD_DEADLINE_DECODER_MS', key: 'deadlines.decoderHeadersMs', kind: 'integer', help: "the decoder's response headers" },
  { name: 'PD_DEADLINE_DECODER_IDLE_MS', key: 'deadlines.decoderIdleMs', kind: 'integer', help: 'silence inside a decoder response' },
  { name: 'PD_LINK_TIMEOUT_MS', key: 'deadlines.linkMs', kind: 'integer', help: 'one link check or status poll' },
  { name: 'PD_DECODER_BUSY_MS', key: 'deadlines.decoderBusyMs', kind: 'integer', help: 'a decoder missing link checks counts as busy this long after its last answer, then down' },
  { name: 'PD_MAX_BODY_BYTES', key: 'limits.maxBodyBytes', kind: 'integer', help: 'largest request body' },
  { name: 'PD_TOKENIZE_WORKER_BYTES', key: 'limits.tokenizeWorkerBytes', kind: 'integer', help: 'bodies this large are tokenized in a worker thread' },
  { name: 'PD_WRITER_BUILDERS', key: 'limits.writerBuilders', kind: 'integer', help: 'threads that build blocks ahead of the write stage (0: none)' },
  { name: 'PD_REQUEST_RULES', key: 'decoder.requestRules', kind: 'string', help: "auto, embedded or off: the decoder's request checks run in the front door" },
  { name: 'PD_RESTART_LIMIT', key: 'restarts.limit', kind: 'integer', help: "serve: restarts of one child allowed within the window of its up time" },
  { name: 'PD_RESTART_WINDOW_MS', key: 'restarts.windowMs', kind: 'integer', help: "serve: the restart window, in the child's up time (start-up and backoff not counted)" },
  { name: 'PD_RESTART_DELAY_MS', key: 'restarts.firstDelayMs', kind: 'integer', help: 'serve: wait before the first restart (it doubles within the window)' },
  { name: 'PD_RESTART_MAX_DELAY_MS', key: 'restarts.maxDelayMs', kind: 'integer', help: 'serve: the longest wait between restarts' },
  { name: 'PD_LOG_FILE', key: 'log.file', kind: 'string', help: 'pino JSON log file' },
  { name: 'PD_LOG_LEVEL', key: 'log.level', kind: 'string', help: 'log level' },
]

function readValue (o: EnvOverride, text: string): string | number | boolean {
  if (o.kind === 'string') return text
  if (o.kind === 'boolean') {
    if (text === 'true') return true
    if (text === 'false') return false
    throw new ConfigError(o.key, `${o.name}=${JSON.stringify(text)} is neither true nor false`, 'environment')
  }
  // Plain decimal digits only: `1e3`, `0x10`, `-1` and `12 ` are mistakes, not numbers.
  if (!/^\d{1,16}$/.test(text) || !Number.isSafeInteger(Number(text))) {
    throw new ConfigError(o.key, `${o.name}=${JSON.stringify(text)} is not a non-negative decimal integer`, 'environment')
  }
  return Number(text)
}

function setPath (target: Record<string, unknown>, key: string, value: unknown): void {
  const parts = key.split('.')
  let at = target
  for (const part of parts.slice(0, -1)) {
    const next = at[part]
    if (next === undefined || next === null) at[part] = {}
    else if (typeof next !== 'object' || Array.isArray(next)) throw new ConfigError(key, `cannot apply an environment override: '${part}' in the file is not an object`)
    at = at[part] as Record<string, unknown>
  }
  at[parts[parts.length - 1]] = value
}

/**
 * Apply every PD_* variable of `env` that is set and not empty to a copy of `raw` (the parsed file,
 * not yet validated). An empty variable counts as unset, because shells export empty ones freely.
 * Returns the copy and the names applied.
 */
export function applyEnvOverrides (raw: Record<string, unknown>, env: Record<string, string | undefined>): { raw: Record<string, unknown>, applied: string[] } {
  const copy = structuredClone(raw)
  const applied: string[] = []
  for (const o of ENV_OVERRIDES) {
    const text = env[o.name]
    if (text === undefined || text === '') continue
    setPath(copy, o.key, readValue(o, text))
    applied.push(o.name)
  }
  return { raw: copy, applied }
}
