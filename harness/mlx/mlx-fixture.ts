// The MLX reference fixtures (harness/fixtures/mlx, made by harness/mlx/omlx_reference.py from oMLX's
// own DeepSeek-V4 model on MLX's CPU backend) and how our engine's caches line up with them.
//
// Layouts (MLX's, batch and kv-head axes squeezed):
//   <phase>.layers.<i>.window            the RotatingKVCache's last `window` rows in temporal order
//   <phase>.layers.<i>.pool<j>.<part>    PoolingCache j (0 the compressor, 1 a CSA layer's indexer):
//                                        buf_kv, buf_gate [remainder, width], pooled [entries, dim],
//                                        prev_win_kv, prev_win_gate [ratio, 2 dim] (CSA only)
//   <phase>.logits_last, decode.<k>.logits, oneshot.layers.<i>.attn_input
// Phases: `oneshot`, `chunked.<boundary>` (after the chunk ending there), `decode.<k>`.
// Our side: the window keeps window-1 rows (MLX keeps at least window); the buffers, pooled entries
// and the previous window (both halves, gate without the position bias) are compared as they are.
import { readSafetensors, viewAs, type Tensor } from '../../src/formats/safetensors/index.ts'
import type { CompressorState, DeepseekV4Engine, ModelCache } from '../../src/model/engine/index.ts'
import { decodeBf16 } from '../../src/numerics/bf16.ts'
import { distance, type Distance } from './distance.ts'

/** One reference file. */
export interface MlxFixture {
  name: string
  metadata: Record<string, string>
  tensors: Map<string, Tensor>
  ids: number[]
  greedy: number[]
  chunks: number[]
  /** `float32` or `bfloat16` (the weights' cast; bfloat16 fixtures are also quantized). */
  dtype: string
  quantized: boolean
  has: (name: string) => boolean
  /** A tensor widened to float32 (bf16 exactly). */
  f32: (name: string) => Float32Array
  dtypeOf: (name: string) => 'F32' | 'BF16'
}

/** harness/fixtures/mlx/<name>.safetensors. */
export async function readMlxFixture (name: string): Promise<MlxFixture> {
  const path = new URL(`../fixtures/mlx/${name}.safetensors`, import.meta.url).pathname
  const { metadata, tensors } = await readSafetensors(path)
  const get = (n: string): Tensor => {
    const t = tensors.get(n)
    if (t === undefined) throw new Error(`MLX fixture ${name} has no tensor ${n}`)
    return t
  }
  const ids = Array.from(viewAs(get('input_ids'), 'I32'), Number)
  return {
    name, metadata, tensors, ids,
    greedy: JSON.parse(metadata.greedy) as number[],
    chunks: metadata.chunks.split(',').map(Number),
    dtype: metadata.dtype,
    quantized: metadata.quantized === '1',
    has: (n) => tensors.has(n),
    f32: (n) => {
      const t = get(n)
      if (t.dtype === 'BF16') return decodeBf16(viewAs(t, 'BF16'))
      if (t.dtype === 'F32') return viewAs(t, 'F32')
      throw new Error(`MLX fixture ${name}: ${n} is ${t.dtype}, not a float tensor`)
    },
    dtypeOf: (n) => {
      const d = get(n).dtype
      if (d !== 'F32' && d !== 'BF16') throw new Error(`MLX fixture ${name}: ${n} is ${d}`)
      return d
    },
  }
}

/** One compared tensor. */
export interface TensorDistance {
  /** The fixture's name for it. */
  name: string
  /** Layer, and the tensor's kind (`window`, `pool0.pooled`, ..., `logits`, `attn_input`). */
  layer: number | null
  kind: string
  dtype: 'F32' | 'BF16'
  distance: Distance
}

/** What does not line up (shapes, counts, missing parts): each a sentence. */
export class LayoutMismatch extends Error {
  override name = 'LayoutMismatch'
}

function rowsOf (flat: ArrayLike<number>, width: number): number {
  return flat.length / width
}

function comparePart (fx: MlxFixture, out: TensorDistance[], name: string, layer: number, kind: string,
  ours: Float32Array | null, width: number): void {
  const present = fx.has(name)
  const empty = fx.metadata[`${name}.none`] === '1' || fx.metadata[`${name}.zero_dim`] !== undefined
  if (!present) {
    if (!empty) throw new LayoutMismatch(`${fx.name}: ${name} is neither stored nor recorded as None or empty`)
    if (ours !== null && ours.length > 0) throw new LayoutMismatch(`${name}: MLX holds nothing, ours holds ${rowsOf(ours, width)} rows`)
    return
  }
  const ref = fx.f32(name)
  if (ours === null) throw new LayoutMismatch(`${name}: MLX holds ${rowsOf(ref, width)} rows, ours nothing`)
  if (ours.length !== ref.length) throw new LayoutMismatch(`${name}: MLX holds ${rowsOf(ref, width)} rows of ${width}, ours ${rowsOf(ours, width)}`)
  out.push({ name, layer, kind, dtype: fx.dtypeOf(name), distance: distance(ours, ref, fx.dtypeOf(name)) })
}

function poolParts (s: CompressorState): Record<string, Float32Array | null> {
  const n = s.bufferLength
  return {
    buf_kv: n === 0 ? null : s.bufferKv.subarray(0, n * s.width),
    buf_gate: n === 0 ? null : s.bufferGate.subarray(0, n * s.width),
    pooled: s.entryCount === 0 ? null : s.entries.view(),
    prev_win_kv: s.overlap ? s.prevWindowKv : null,
    prev_win_gate: s.overlap ? s.prevWindowGate : null,
  }
}

/** Our cache against the fixture's at `phase`, every layer and part. */
export function compareCache (fx: MlxFixture, phase: string, cache: ModelCache): TensorDistance[] {
  const out: TensorDistance[] = []
  cache.layers.forEach((layer, i) => {
    const base = `${phase}.layers.${i}`
    const wname = `${base}.window`
    const ref = fx.f32(wname)
    const d = layer.headDim
    const refRows = ref.length / d
    const ours = layer.windowRows()
    const rows = ours.length / d
    // MLX keeps at least the window's rows; ours keeps window-1: compare our rows with MLX's last ones.
    if (refRows !== rows && refRows !== rows + 1) {
      throw new LayoutMismatch(`${wname}: MLX keeps ${refRows} rows (of ${fx.metadata[`${wname}.rows`]}), ours ${rows}`)
    }
    out.push({ name: wname, layer: i, kind: 'window', dtype: fx.dtypeOf(wname), distance: distance(ours, ref.subarray((refRows - rows) * d), fx.dtypeOf(wname)) })
    const pools = [layer.compressor, layer.indexer].filter((s): s is CompressorState => s !== null)
    pools.forEach((s, j) => {
      for (const [part, data] of Object.entries(poolParts(s))) {
        const width = part === 'pooled' ? s.dim : s.width
        comparePart(fx, out, `${base}.pool${j}.${part}`, i, `pool${j}.${part}`, data, width)
      }
    })
  })
  return out
}

/** One full run of a fixture's legs through our engine, with every comparison. */
export interface CaseRun {
  fixture: MlxFixture
  distances: TensorDistance[]
  /** Our greedy tokens after the chunked prefill (MLX's are fx.greedy). */
  greedy: number[]
}

function logitsDistance (fx: MlxFixture, name: string, ours: Float32Array): TensorDistance {
  return { name, layer: null, kind: 'logits', dtype: fx.dtypeOf(name), distance: distance(ours, fx.f32(name), fx.dtypeOf(name)) }
}

/**
 * Run the fixture's legs on `engine` (built from the same checkpoint): the one-shot prefill, the
 * chunked prefill with a comparison at every stored boundary, and decode steps fed MLX's own greedy
 * tokens (so both sides decode the same sequence). `mutate` may alter our cache after each chunk
 * (the suite's planted errors).
 */
export function runCase (fx: MlxFixture, engine: DeepseekV4Engine, mutate?: (cache: ModelCache, boundary: number) => void): CaseRun {
  const distances: TensorDistance[] = []
  const layers = engine.config.numHiddenLayers
  const inputs: Float32Array[][] = Array.from({ length: layers }, () => [])
  const wantInputs = fx.has('oneshot.layers.0.attn_input')
  const oneshot = engine.newCache()
  const hidden = engine.config.hiddenSize
  const r = engine.prefill(fx.ids, oneshot, wantInputs ? { attnInputHook: (l, _s, rows, count) => { inputs[l].push(rows.slice(0, count * hidden)) } } : {})
  distances.push(logitsDistance(fx, 'oneshot.logits_last', r.logits))
  if (wantInputs) {
    for (let l = 0; l < layers; l++) {
      const name = `oneshot.layers.${l}.attn_input`
      const flat = new Float32Array(inputs[l].reduce((a, p) => a + p.length, 0))
      let o = 0
      for (const p of inputs[l]) { flat.set(p, o); o += p.length }
      distances.push({ name, layer: l, kind: 'attn_input', dtype: fx.dtypeOf(name), distance: distance(flat, fx.f32(name), fx.dtypeOf(name)) })
    }
  }
  if (fx.has('oneshot.layers.0.window')) distances.push(...compareCache(fx, 'oneshot', oneshot))
  const cache = engine.newCache()
  let at = 0
  let last = r
  for (const n of fx.chunks) {
    last = engine.prefill(fx.ids.slice(at, at + n), cache)
    at += n
    distances.push(logitsDistance(fx, `chunked.${at}.logits_last`, last.logits))
    if (fx.has(`chunked.${at}.layers.0.window`)) distances.push(...compareCache(fx, `chunked.${at}`, cache))
    mutate?.(cache, at)
  }
  const greedy: number[] = []
  let logits = last.logits
  fx.greedy.forEach((token, step) => {
    greedy.push(argmax(logits))
    logits = engine.decode(token, cache)
    distances.push(logitsDistance(fx, `decode.${step}.logits`, logits))
    if (fx.has(`decode.${step}.layers.0.window`)) distances.push(...compareCache(fx, `decode.${step}`, cache))
  })
  return { fixture: fx, distances, greedy }
}

function argmax (v: Float32Array): number {
  let best = 0
  for (let i = 1; i < v.length; i++) if (v[i] > v[best]) best = i
  return best
}
