// Shared helpers of the engine suites: the tiny seed-1 checkpoint, the transformers fixtures, and
// the comparisons (relative error, bf16 ulp histograms, bit equality).
import { readSafetensors, viewAs, type Tensor } from '../../src/formats/safetensors/index.ts'
import { checkpointDigest, loadCheckpoint, type LoadedCheckpoint } from '../../src/model/checkpoint/index.ts'
import type { DumpTensor, ModelCache } from '../../src/model/engine/index.ts'
import { decodeBf16 } from '../../src/numerics/bf16.ts'
import { ulps } from '../../harness/mlx/distance.ts'
import { tinyCheckpoint as sharedTinyCheckpoint } from '../support/checkpoints.ts'

/**
 * The tiny seed-1 checkpoint (the one the fixtures were made from: the run's shared one,
 * suites/support/checkpoints.ts), loaded, and its digest. `dispose` has nothing to remove: the run
 * removes the shared folder.
 */
export async function tinyCheckpoint (): Promise<{ ckpt: LoadedCheckpoint, digest: string, dispose: () => void }> {
  const dir = sharedTinyCheckpoint()
  const digest = await checkpointDigest(dir)
  const ckpt = await loadCheckpoint(dir)
  return { ckpt, digest, dispose: () => {} }
}

/** A reference fixture of harness/fixtures. */
export interface Fixture {
  metadata: Record<string, string>
  tensors: Map<string, Tensor>
  /** A tensor as float32 (bf16 widened exactly). */
  f32: (name: string) => Float32Array
  ids: number[]
  greedy: number[]
  tokens: number
  split: number
}

/** Read harness/fixtures/<name>.safetensors. */
export async function readFixture (name: string): Promise<Fixture> {
  const path = new URL(`../../harness/fixtures/${name}.safetensors`, import.meta.url).pathname
  const { metadata, tensors } = await readSafetensors(path)
  const f32 = (n: string) => {
    const t = tensors.get(n)
    if (t === undefined) throw new Error(`fixture ${name} has no tensor ${n}`)
    return t.dtype === 'BF16' ? decodeBf16(viewAs(t, 'BF16')) : viewAs(t, 'F32')
  }
  const ints = (n: string) => Array.from(viewAs(tensors.get(n)!, 'I64'), Number)
  return { metadata, tensors, f32, ids: ints('input_ids'), greedy: ints('greedy'), tokens: Number(metadata.tokens), split: Number(metadata.split) }
}

/** The message when a fixture was made from another checkpoint than make-checkpoint writes today. */
export function staleMessage (fixture: string): string {
  return `${fixture} was made from another checkpoint than make-checkpoint --preset tiny --seed 1 writes now: re-make the fixtures (harness/make-reference-fixtures.sh)`
}

/** ||a - ref|| / ||ref|| in float64. */
export function relError (a: ArrayLike<number>, ref: ArrayLike<number>): number {
  if (a.length !== ref.length) throw new Error(`length ${a.length} vs ${ref.length}`)
  let d = 0
  let r = 0
  for (let i = 0; i < a.length; i++) {
    d += (a[i] - ref[i]) ** 2
    r += ref[i] ** 2
  }
  return r === 0 ? (d === 0 ? 0 : Infinity) : Math.sqrt(d / r)
}

/** Distance in bf16 ulps between two values (each first rounded to bf16). */
export function bf16Ulps (a: number, b: number): number {
  return ulps(a, b, 'BF16')
}

/** Ulp histogram buckets: 0, 1, 2, 3-4, 5-8, >8. */
export const ULP_BUCKETS = ['0', '1', '2', '3-4', '5-8', '>8'] as const

/** Counts per ULP_BUCKETS of the bf16 ulp distances between a and ref. */
export function ulpHistogram (a: ArrayLike<number>, ref: ArrayLike<number>): number[] {
  const h = [0, 0, 0, 0, 0, 0]
  for (let i = 0; i < a.length; i++) {
    const u = bf16Ulps(a[i], ref[i])
    h[u === 0 ? 0 : u === 1 ? 1 : u === 2 ? 2 : u <= 4 ? 3 : u <= 8 ? 4 : 5]++
  }
  return h
}

/** The histogram as percentages, for printing. */
export function showHistogram (h: number[]): string {
  const n = h.reduce((a, b) => a + b, 0)
  return h.map((c, i) => `${ULP_BUCKETS[i]}:${(100 * c / n).toFixed(2)}%`).join(' ')
}

/** Index of the first differing bit pattern of two float32 arrays, or -1 (lengths must match). */
export function firstBitDifference (a: Float32Array, b: Float32Array): number {
  if (a.length !== b.length) return Math.min(a.length, b.length)
  const x = new Uint32Array(a.buffer, a.byteOffset, a.length)
  const y = new Uint32Array(b.buffer, b.byteOffset, b.length)
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return i
  return -1
}

/** Every cache tensor of two caches whose bits differ, as `name@index` (empty when identical). */
export function cacheBitDifferences (a: ModelCache, b: ModelCache): string[] {
  const ta = a.tensors('c')
  const tb = b.tensors('c')
  const out: string[] = []
  if (a.tokenCount !== b.tokenCount) out.push(`tokenCount ${a.tokenCount} vs ${b.tokenCount}`)
  for (const name of new Set([...ta.keys(), ...tb.keys()])) {
    const x = ta.get(name)
    const y = tb.get(name)
    if (x === undefined || y === undefined) {
      out.push(`${name} only in one`)
      continue
    }
    if (JSON.stringify(x.shape) !== JSON.stringify(y.shape)) {
      out.push(`${name} shape ${x.shape} vs ${y.shape}`)
      continue
    }
    if (x.dtype === 'I64' || y.dtype === 'I64') {
      if (x.data[0] !== y.data[0]) out.push(`${name} ${x.data[0]} vs ${y.data[0]}`)
      continue
    }
    const i = firstBitDifference(x.data, (y as DumpTensor & { dtype: 'F32' }).data)
    if (i >= 0) out.push(`${name}@${i}`)
  }
  return out
}

/** Argmax of row r of a [rows, n] array, ties to the lower index. */
export function argmaxRow (v: ArrayLike<number>, r: number, n: number): number {
  let best = 0
  for (let i = 1; i < n; i++) if (v[r * n + i] > v[r * n + best]) best = i
  return best
}
