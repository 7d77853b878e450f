// Per-tensor distances between two decoded layer files: the fraction of identical elements (bit
// for bit) and a histogram of distances in units in the last place of the stored dtype (bf16 ulps
// for BF16 tensors, f32 ulps otherwise), measured on the ordered integer line of the bit patterns.
import { decodeLayerFile } from '../src/wire/layer-file.ts'
import type { DumpTensor } from '../src/model/engine/index.ts'
import { parseHeader } from '../src/formats/safetensors/index.ts'
import { ulps } from './mlx/distance.ts'

/** The distance of one tensor. */
export interface TensorDistance {
  name: string
  dtype: string
  elements: number
  identical: number
  /** identical / elements (1 for an empty tensor). */
  identicalFraction: number
  worstUlps: number
  /** ulps -> element count; ulps above 16 are pooled under 17 ('>16'). */
  histogram: Record<string, number>
  /** Why the tensors cannot be compared element by element (names, dtypes or shapes differ). */
  mismatch?: string
}

/** The stored dtype of every tensor of a layer file. */
export function storedDtypes (bytes: Uint8Array): Map<string, string> {
  const n = Number(new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true))
  const header = parseHeader(bytes.subarray(8, 8 + n), 'layer file')
  return new Map(header.tensors.map((t) => [t.name, t.dtype]))
}

/** Compare two layer files (ours: the torch hook's, ref: the TypeScript hook's) tensor by tensor. */
export function layerFileDistances (ours: Uint8Array, ref: Uint8Array): TensorDistance[] {
  const a = decodeLayerFile(ours, 'torch hook layer file').tensors
  const b = decodeLayerFile(ref, 'TypeScript hook layer file').tensors
  const dtypesA = storedDtypes(ours)
  const dtypesB = storedDtypes(ref)
  const names = [...new Set([...a.keys(), ...b.keys()])].sort()
  return names.map((name) => tensorDistance(name, a.get(name), b.get(name), dtypesA.get(name), dtypesB.get(name)))
}

function tensorDistance (name: string, x: DumpTensor | undefined, y: DumpTensor | undefined, dx?: string, dy?: string): TensorDistance {
  const empty = { name, dtype: dx ?? dy ?? '?', elements: 0, identical: 0, identicalFraction: 0, worstUlps: Infinity, histogram: {} }
  if (x === undefined || y === undefined) return { ...empty, mismatch: `only in ${x === undefined ? 'the TypeScript hook' : 'the torch hook'}'s file` }
  if (dx !== dy || x.shape.join(',') !== y.shape.join(',')) return { ...empty, mismatch: `${dx} [${x.shape}] vs ${dy} [${y.shape}]` }
  const n = x.data.length
  const histogram: Record<string, number> = {}
  let identical = 0
  let worst = 0
  for (let i = 0; i < n; i++) {
    let d: number
    if (x.dtype === 'I64' || y.dtype === 'I64') d = x.data[i] === y.data[i] ? 0 : Infinity
    else {
      const bx = new Uint32Array(x.data.buffer, x.data.byteOffset, n)[i]
      const by = new Uint32Array(y.data.buffer, y.data.byteOffset, n)[i]
      d = bx === by ? 0 : ulps(x.data[i] as number, y.data[i] as number, dx === 'BF16' ? 'BF16' : 'F32')
    }
    if (d === 0) identical++
    worst = Math.max(worst, d)
    const key = d > 16 ? '>16' : String(d)
    histogram[key] = (histogram[key] ?? 0) + 1
  }
  return { name, dtype: dx ?? '?', elements: n, identical, identicalFraction: n === 0 ? 1 : identical / n, worstUlps: worst, histogram }
}

/** One line per tensor: identical fraction, worst ulps and the histogram. */
export function describeDistances (label: string, distances: readonly TensorDistance[]): string {
  const lines = distances.map((d) => d.mismatch !== undefined
    ? `  ${d.name}: MISMATCH ${d.mismatch}`
    : `  ${d.name} ${d.dtype} [${d.elements}]: identical ${(d.identicalFraction * 100).toFixed(4)}% (${d.identical}/${d.elements}), worst ${d.worstUlps} ulp, histogram ${JSON.stringify(d.histogram)}`)
  return [`${label}:`, ...lines].join('\n')
}
