// The model dump: what `pd-bridge dump` writes, under the names harness/hf_reference.py's `dump`
// writes, so any checkpoint can be compared with transformers tensor by tensor:
//   input_ids                               I64 [T]
//   {oneshot|chunked}.layers.{i}.attn_input F32 [T, hidden]   (rows each attention block received)
//   {oneshot|chunked}.layers.{i}.window / .{compressor|indexer}.*   the cache (ModelCache.tensors)
//   oneshot.logits_tail                     F32 [min(T, 64), vocab]
//   chunked.logits_last                     F32 [vocab]       (after [0, split) then [split, T))
//   greedy                                  I64 [K]           (K > 0 only, as the harness does)
import { readFile, stat } from 'node:fs/promises'
import { dirname } from 'node:path'
import { PdBridgeError, SafetensorsError } from '../errors.ts'
import { SafetensorsFile, tensorFrom, viewAs, writeSafetensors, type Tensor } from '../formats/safetensors/index.ts'
import { checkpointDigest } from './checkpoint/index.ts'
import { DeepseekV4Engine, type DumpTensor, type ModelCache } from './engine/index.ts'
import { getProfile, profileFingerprint } from './profiles/index.ts'

/** Rows of `oneshot.logits_tail` (fewer when the prompt is shorter), as the harness dumps them. */
export const LOGITS_TAIL_ROWS = 64

/** The `producer` metadata value of a dump. */
export const DUMP_PRODUCER = 'pd-bridge dump'

/** What to dump from a loaded engine. */
export interface DumpRequest {
  /** The prompt (token ids). */
  tokens: readonly number[]
  /** Also prefill [0, split) then [split, T) and dump under `chunked.`; 0 < split < T. */
  split?: number
  /** Greedy tokens to generate after the one-shot prefill (0: none, no `greedy` tensor). */
  greedy?: number
  /** Record per-layer attention inputs (default true; [T, hidden] per layer and pass). */
  attnInputs?: boolean
}

/** A dump: its tensors and its string metadata. */
export interface ModelDump {
  tensors: Map<string, Tensor>
  metadata: Record<string, string>
}

function toTensor (t: DumpTensor): Tensor {
  return t.dtype === 'F32' ? tensorFrom('F32', t.shape, t.data) : tensorFrom('I64', t.shape, t.data)
}

/** Argmax of v[off, off + n), ties to the lower id: the engine's greedy rule. */
function argmax (v: Float32Array, off: number, n: number): number {
  let best = 0
  for (let i = 1; i < n; i++) if (v[off + i] > v[off + best]) best = i
  return best
}

/** Collects each layer's attention inputs into [T, hidden] arrays, placed by absolute position. */
function attnInputRecorder (layers: number, tokens: number, hidden: number) {
  const rows = Array.from({ length: layers }, () => new Float32Array(tokens * hidden))
  const hook = (layer: number, startPos: number, x: Float32Array, count: number) => {
    rows[layer].set(x.subarray(0, count * hidden), startPos * hidden)
  }
  return { rows, hook }
}

function addCache (out: Map<string, Tensor>, cache: ModelCache, prefix: string): void {
  for (const [name, t] of cache.tensors(prefix)) out.set(name, toTensor(t))
}

function addAttnInputs (out: Map<string, Tensor>, rows: Float32Array[], prefix: string, tokens: number, hidden: number): void {
  rows.forEach((x, i) => out.set(`${prefix}.layers.${i}.attn_input`, tensorFrom('F32', [tokens, hidden], x)))
}

/** Refuses a bad request before any work, with the option named as the CLI spells it. */
function checkRequest (req: DumpRequest, engine: DeepseekV4Engine): void {
  const T = req.tokens.length
  const cfg = engine.config
  if (T === 0) throw new PdBridgeError('dump: the prompt is empty (at least one token is needed)')
  const bad = req.tokens.findIndex((t) => !Number.isSafeInteger(t) || t < 0 || t >= cfg.vocabSize)
  if (bad >= 0) throw new PdBridgeError(`dump: token ${bad} is ${String(req.tokens[bad])}, not a token id of this model (vocab_size ${cfg.vocabSize})`)
  if (req.split !== undefined && (!Number.isSafeInteger(req.split) || req.split <= 0 || req.split >= T)) {
    throw new PdBridgeError(`--split ${String(req.split)} is out of range: it must satisfy 0 < N < T = ${T}`)
  }
  const greedy = req.greedy ?? 0
  if (!Number.isSafeInteger(greedy) || greedy < 0) throw new PdBridgeError(`--greedy must be a non-negative integer, got ${String(req.greedy)}`)
  // The K-th pick is never fed back, so the cache ends at T + K - 1 positions.
  const positions = T + Math.max(0, greedy - 1)
  if (positions > cfg.maxPositionEmbeddings) {
    throw new PdBridgeError(`${T} prompt tokens + ${greedy} greedy tokens need ${positions} positions, more than max_position_embeddings (${cfg.maxPositionEmbeddings})`)
  }
}

/**
 * Run the dump on a loaded engine: a one-shot prefill (attention inputs, cache, logits tail),
 * greedy decoding continued from that cache, and with `split` a two-chunk prefill on a fresh
 * cache. Returns the tensors (all float tensors F32) without metadata.
 */
export function dumpEngine (engine: DeepseekV4Engine, req: DumpRequest): Map<string, Tensor> {
  checkRequest(req, engine)
  const cfg = engine.config
  const tokens = Array.from(req.tokens)
  const T = tokens.length
  const hidden = cfg.hiddenSize
  const layers = cfg.numHiddenLayers
  const withInputs = req.attnInputs !== false
  const out = new Map<string, Tensor>()
  out.set('input_ids', tensorFrom('I64', [T], BigInt64Array.from(tokens, (t) => BigInt(t))))

  const one = attnInputRecorder(withInputs ? layers : 0, T, hidden)
  const oneshot = engine.newCache()
  const tail = engine.prefill(tokens, oneshot, { logits: { tail: LOGITS_TAIL_ROWS }, attnInputHook: withInputs ? one.hook : undefined })
  if (withInputs) addAttnInputs(out, one.rows, 'oneshot', T, hidden)
  addCache(out, oneshot, 'oneshot')
  out.set('oneshot.logits_tail', tensorFrom('F32', [tail.rows, tail.vocab], tail.logits))

  const k = req.greedy ?? 0
  if (k > 0) {
    // Continue from the one-shot cache (its tensors are already copied out): the same bits as
    // engine.greedy, which would prefill the prompt again.
    const picks: bigint[] = []
    let logits = tail.logits
    let row = tail.rows - 1
    for (let i = 0; i < k; i++) {
      const next = argmax(logits, row * tail.vocab, tail.vocab)
      picks.push(BigInt(next))
      if (i + 1 < k) {
        logits = engine.decode(next, oneshot)
        row = 0
      }
    }
    out.set('greedy', tensorFrom('I64', [k], BigInt64Array.from(picks)))
  }

  if (req.split !== undefined) {
    const two = attnInputRecorder(withInputs ? layers : 0, T, hidden)
    const hook = withInputs ? two.hook : undefined
    const chunked = engine.newCache()
    engine.prefill(tokens.slice(0, req.split), chunked, { logits: 'none', attnInputHook: hook })
    const last = engine.prefill(tokens.slice(req.split), chunked, { logits: 'last', attnInputHook: hook })
    if (withInputs) addAttnInputs(out, two.rows, 'chunked', T, hidden)
    addCache(out, chunked, 'chunked')
    out.set('chunked.logits_last', tensorFrom('F32', [last.vocab], last.logits))
  }
  return out
}

/** What `dumpCheckpoint` needs. */
export interface DumpCheckpointOptions extends DumpRequest {
  /** Checkpoint directory (config.json + safetensors). */
  model: string
  /** Numerics profile name (docs/profiles.md). */
  profile: string
}

/**
 * Load the checkpoint under the profile and dump it (see dumpEngine), with metadata: producer,
 * profile, profile_fingerprint, checkpoint_sha256 (checkpointDigest), tokens (T), split ('' when
 * none), greedy (K), attn_inputs. An unknown profile fails before the checkpoint is read.
 */
export async function dumpCheckpoint (opts: DumpCheckpointOptions): Promise<ModelDump> {
  const profile = getProfile(opts.profile)
  const engine = await DeepseekV4Engine.load(opts.model, profile)
  checkRequest(opts, engine)
  const digest = await checkpointDigest(opts.model)
  const tensors = dumpEngine(engine, opts)
  const metadata: Record<string, string> = {
    producer: DUMP_PRODUCER,
    profile: profile.name,
    profile_fingerprint: profileFingerprint(profile),
    checkpoint_sha256: digest,
    tokens: String(opts.tokens.length),
    split: opts.split === undefined ? '' : String(opts.split),
    greedy: String(opts.greedy ?? 0),
    attn_inputs: opts.attnInputs === false ? 'no' : 'yes',
  }
  return { tensors, metadata }
}

function checkIds (file: string, ids: ArrayLike<number | bigint>): number[] {
  if (ids.length === 0) throw new PdBridgeError(`--tokens ${file}: holds no token ids (at least one is needed)`)
  const out = new Array<number>(ids.length)
  for (let i = 0; i < ids.length; i++) {
    const v = ids[i]
    const n = typeof v === 'bigint' ? (v >= 0n && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : -1) : v
    if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0) {
      throw new PdBridgeError(`--tokens ${file}: entry ${i} is ${typeof v === 'bigint' ? v.toString() : JSON.stringify(v)}, not a non-negative integer token id`)
    }
    out[i] = n
  }
  return out
}

async function tokensFromJson (file: string): Promise<number[]> {
  let value: unknown
  try {
    value = JSON.parse(await readFile(file, 'utf8'))
  }
  catch (err) {
    if ((err as NodeJS.ErrnoException).code !== undefined) throw err
    throw new PdBridgeError(`--tokens ${file}: not valid JSON (${(err as Error).message})`)
  }
  if (!Array.isArray(value)) throw new PdBridgeError(`--tokens ${file}: expected a JSON array of token ids, found ${value === null ? 'null' : typeof value}`)
  return checkIds(file, value as number[])
}

async function tokensFromSafetensors (file: string): Promise<number[]> {
  const st = await SafetensorsFile.open(file)
  try {
    const info = st.tensors.get('input_ids')
    if (info === undefined) throw new SafetensorsError(file, 'has no tensor named "input_ids" (--tokens needs one, I64 or I32)')
    if (info.dtype !== 'I64' && info.dtype !== 'I32') {
      throw new SafetensorsError(file, `input_ids is ${info.dtype} [${info.shape.join(', ')}]; --tokens needs I64 or I32`)
    }
    const t = await st.read('input_ids')
    return checkIds(file, info.dtype === 'I64' ? viewAs(t, 'I64') : viewAs(t, 'I32'))
  }
  finally {
    await st.close()
  }
}

/**
 * The token ids of a `--tokens` file: a JSON array of non-negative integers, or a safetensors
 * file with an `input_ids` tensor (I64 or I32, any shape, flattened in row-major order). The
 * format is told by the extension (.json / .safetensors); another extension is read as JSON when
 * its first non-blank character is `[`, else as safetensors. Errors name the file and the problem.
 */
export async function readTokenIds (file: string): Promise<number[]> {
  if (file.endsWith('.json')) return tokensFromJson(file)
  if (file.endsWith('.safetensors')) return tokensFromSafetensors(file)
  const head = (await readFile(file)).subarray(0, 64).toString('latin1').trimStart()
  return head.startsWith('[') ? tokensFromJson(file) : tokensFromSafetensors(file)
}

async function exists (path: string): Promise<boolean> {
  try {
    await stat(path)
    return true
  }
  catch {
    return false
  }
}

/**
 * Check that a dump may be written to `out`: its directory exists, and `out` does not exist
 * unless `force`. Run before the (possibly long) computation.
 */
export async function checkDumpTarget (out: string, force: boolean): Promise<void> {
  const dir = dirname(out)
  let isDir = false
  try {
    isDir = (await stat(dir)).isDirectory()
  }
  catch {}
  if (!isDir) throw new PdBridgeError(`--out ${out}: the directory ${dir} does not exist`)
  if (!force && await exists(out)) throw new PdBridgeError(`--out ${out}: already exists (pass --force to replace it)`)
}

/** Write a dump as one safetensors file (atomically: a temporary name renamed into place). */
export async function writeDump (out: string, dump: ModelDump): Promise<void> {
  await writeSafetensors(out, dump.tensors, dump.metadata)
}
