// The front door's deployment config: where every link lives (decoder, prefill engine, share,
// store, sidecar, model), the routing thresholds, the bridge queue, the stage deadlines and the
// log. One JSON file validated with zod (unknown keys refused, so a typo is an error, not a
// silently ignored setting), then PD_* environment overrides (env.ts).
import { z } from 'zod'
import { DEFAULT_BLOCK_SIZE } from './block-size.ts'

const int = (min: number) => z.int().min(min).max(Number.MAX_SAFE_INTEGER)
const ms = int(1)
const path = z.string().min(1, 'must not be empty')
const url = z.string().min(1, 'must not be empty').refine((u) => {
  try {
    const p = new URL(u)
    return (p.protocol === 'http:' || p.protocol === 'https:') && p.search === '' && p.hash === ''
  } catch {
    return false
  }
}, 'must be an http(s) URL without query or fragment, e.g. http://127.0.0.1:8011')

/** Stage deadlines in milliseconds. */
const deadlinesSchema = z.strictObject({
  /** Waiting in the bridge queue before the bridge starts. */
  queueMs: ms.default(600_000),
  /** POST /v1/prefill until the engine accepts (202). */
  submitMs: ms.default(10_000),
  /** From the submit to the last capture layer delivered: the engine's prefill and the transfer. */
  captureMs: ms.default(1_800_000),
  /** From the last layer delivered to every block written and verified. */
  writeMs: ms.default(600_000),
  /** POST /v1/cache/rescan on the decoder. */
  rescanMs: ms.default(30_000),
  /**
   * Progress deadline beside the totals: the share sending nothing (no answer, no byte) for this
   * long while a capture streams, or the engine's status of the capture not changing for this long.
   */
  stallMs: ms.default(20_000),
  /** The engine's progress deadline alone, when it must differ from stallMs (e.g. chunks slower than it); default stallMs. */
  engineStallMs: ms.optional(),
  /** The whole bridge, queue wait excluded. */
  bridgeMs: ms.default(3_600_000),
  /** Forwarded request until the decoder's response headers. */
  decoderHeadersMs: ms.default(1_800_000),
  /** Silence allowed between two pieces of a decoder response body. */
  decoderIdleMs: ms.default(600_000),
  /** One link check (/health) and one engine status poll. */
  linkMs: ms.default(3_000),
  /**
   * How long after its last /health answer in time a decoder that still accepts connections but misses
   * linkMs counts as busy (up, its last facts stand, the front door degraded); past it, down.
   */
  decoderBusyMs: ms.default(120_000),
  /** Consecutive failed engine status polls (one per pollMs) before the engine counts as down. */
  engineDownPolls: int(1).default(8),
  /** Wait between engine status polls and manifest polls while a capture runs. */
  pollMs: ms.default(250),
  /** Deleting a verified capture on the prefill engine (DELETE /v1/prefill/{id}). */
  deleteMs: ms.default(30_000),
})

/**
 * serve's restarts of its children (src/stack/supervisor.ts, RestartPolicy): read by serve, not by
 * the front door. The window is the child's up time, so a slow start-up on a loaded machine does
 * not stretch a crash loop out of it.
 */
export const restartsSchema = z.strictObject({
  /** Restarts of one child allowed within windowMs of its up time; one more death stops the stack (0: none). */
  limit: int(0).default(5),
  /** The window, in the child's up time (ready and running), not wall time. */
  windowMs: ms.default(60_000),
  /** Wait before the first restart; it doubles with each restart within the window. */
  firstDelayMs: ms.default(500),
  /** The longest wait between restarts. */
  maxDelayMs: ms.default(8000),
}).refine((r) => r.maxDelayMs >= r.firstDelayMs, { message: 'maxDelayMs must be at least firstDelayMs', path: ['maxDelayMs'] })

/** The front door's config after validation and defaults. */
export const frontConfigSchema = z.strictObject({
  listen: z.strictObject({
    host: z.string().min(1).default('127.0.0.1'),
    /** 0 picks a free port (the ready line says which). */
    port: int(0).max(65535).default(8012),
  }).prefault({}),
  decoder: z.strictObject({
    /** The decoder's OpenAI base URL (without /v1). */
    url,
    /** The decoder's checkpoint directory: config.json and tokenizer.json (the template prompts are tokenized with). */
    model: path.optional(),
    /** The model name in the decoder's block keys and /v1/models; default: asked from the decoder. */
    modelName: z.string().min(1).optional(),
    /**
     * Which decoder kind it is, so which store the bridge writes (src/decoders/registry.ts lists them,
     * docs/decoder-kinds.md); absent: the registry's default. The front door refuses an unknown name at start.
     */
    engine: z.string().min(1, 'must not be empty').optional(),
    /** llama.cpp's K cache type (its context setting, part of its state geometry); read by that kind only. */
    kvCacheType: z.enum(['F32', 'F16']).default('F32'),
    /** The decoder's numerics profile (part of the store geometry). */
    profile: z.string().min(1).default('decoder'),
    /** The decoder's block store root (on this machine). */
    cacheDir: path.optional(),
    /** Tokens per block; must equal the decoder's and the sidecar's (its kind's store checks the pool ratios). */
    blockSize: int(1).default(DEFAULT_BLOCK_SIZE),
    /**
     * Which request rules the front door checks before any work: `embedded` (the embedded decoder's own
     * checks, src/engines/decoder/request.ts), `off` (only what routing reads), `auto` (embedded when the
     * decoder's /v1/models says owned_by pd-bridge).
     */
    requestRules: z.enum(['auto', 'embedded', 'off']).default('auto'),
    /** Read by the oMLX kind only: blocks oMLX wrote itself are left alone (`leave`) or served by our store too (`serve`). */
    omlxBlocks: z.enum(['leave', 'serve']).default('leave'),
  }),
  prefill: z.strictObject({
    /** The prefill engine's base URL; absent: bridging is off. */
    url: url.optional(),
    /** Capture memory budget sent with every prefill request; absent: the engine's default. */
    memoryBudgetBytes: int(1).optional(),
  }).prefault({}),
  share: z.strictObject({
    /** The capture share's base URL; absent: captures are read from capture.dir on this machine. */
    url: url.optional(),
  }).prefault({}),
  capture: z.strictObject({
    /** The prefill engine's capture root, when it is on this machine's file system (used without a share). */
    dir: path.optional(),
    /** Where streamed captures are spooled while blocks are written; default a temporary directory. */
    spoolDir: path.optional(),
    /**
     * Which captures stay on the prefill side once their blocks are written and verified (deleted
     * through the engine's DELETE /v1/prefill/{id}): `none` deletes every one, `failed` keeps the
     * partial ones too, `all` deletes nothing. A capture whose bridge failed is always kept.
     */
    retain: z.enum(['none', 'failed', 'all']).default('none'),
    /**
     * Write blocks while the engine runs, from the block segments it publishes after every chunk,
     * when the engine says it can (`stream_blocks` in its /health) and the decoder's target builds
     * blocks; otherwise (or false) the blocks are written after the capture is sealed.
     */
    streamBlocks: z.boolean().default(false),
  }).prefault({}),
  /** The decoder's sidecar directory (export-weights): its fingerprint and block size are checked. */
  sidecar: path.optional(),
  routing: z.strictObject({
    /** Prompts shorter than this go straight to the decoder. */
    minTokens: int(1).default(1024),
    /** Prompts with fewer uncached tokens than this go straight to the decoder. */
    minTail: int(0).default(256),
    /** Envelope guard: prompts longer than this are never bridged. */
    maxBridgeTokens: int(1).default(262_144),
  }).prefault({}),
  queue: z.strictObject({
    /** Bridges that may wait behind the running one. */
    maxWaiting: int(0).default(4),
    /** A request that finds the queue full: served natively (`native`) or refused with 429 (`reject`). */
    whenFull: z.enum(['native', 'reject']).default('native'),
    /**
     * Bridges that run at once: the engine prefills one capture at a time, so with more than one,
     * a bridge's block writes overlap the next one's prefill. A bridge whose prompt shares full
     * blocks with a running one waits for it and continues from its blocks (docs/front-door.md).
     */
    concurrentBridges: int(1).default(1),
  }).prefault({}),
  deadlines: deadlinesSchema.prefault({}),
  limits: z.strictObject({
    /** Largest request body; larger is a 413. */
    maxBodyBytes: int(1).default(4 * 1024 * 1024),
    /** Bodies of at least this many bytes are tokenized in a worker thread, so the event loop stays free. */
    tokenizeWorkerBytes: int(0).default(256 * 1024),
    /**
     * Threads that read, build and encode blocks ahead while the write stage puts them in order
     * (docs/block-writer.md); 0: all on the event loop. Off by default: on 2 cores the threads' start
     * costs more than they save.
     */
    writerBuilders: int(0).default(0),
  }).prefault({}),
  restarts: restartsSchema.prefault({}),
  log: z.strictObject({
    /** pino JSON lines go here (created with its directory); absent: stderr. */
    file: path.optional(),
    level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  }).prefault({}),
})

/** The validated front door config. */
export type FrontConfig = z.output<typeof frontConfigSchema>

/** Stage deadlines (FrontConfig['deadlines']). */
export type FrontDeadlines = FrontConfig['deadlines']
