// Build llama.cpp's sequence state from our cache at a boundary of T tokens: the per-layer tensors
// our engine's cache and a capture's layer files hold (`layers.{i}.window`, `.compressor.*`,
// `.indexer.*`; the names are src/model/engine/cache-layout.ts's cacheTensorNames), the compressors' position biases, the prompt ids.
// What llama.cpp computes differently from us in storing them is applied here as named transforms:
// the Walsh-Hadamard rotation of K rows (hadamard.ts), the cache dtype (half.ts), the score =
// gate + position bias it keeps in its rings (we add the bias when a window is pooled).
import type { DumpTensor } from '../../../model/engine/cache.ts'
import { cacheTensorNames } from '../../../model/engine/cache-layout.ts'
import { LlamaCppStateError } from './errors.ts'
import {
  DSV4_MODE_FULL, DSV4_VERSION, GGML_F32, K_CACHE_VERSION, POOLS, RING_VERSION, ggmlTypeId, ggmlTypeSize,
  type CellRecord, type KCacheSection, type LlamaCppState, type Pool, type RingSection, type StateTensor,
} from './format.ts'
import { poolLayers, poolRatio, poolWidth, ringSize, ringWidth, rotates, rotationSize, type LlamaCppStateGeometry } from './geometry.ts'
import { ggmlHadamardRows } from './hadamard.ts'
import { f32ToF16 } from './half.ts'
import { ringRow, windowPositions } from './liveness.ts'

const fround = Math.fround

/** Our cache at a boundary: what the builder reads. */
export interface OurCache {
  /** The token ids the cache holds, positions [0, T). */
  tokens: readonly number[]
  /** A cache tensor by its dump name (`layers.3.compressor.buffer_kv`); undefined when absent. */
  tensor: (name: string) => DumpTensor | undefined
  /** Layer i's compressor or indexer position bias, [ratio, projection width]. */
  positionBias: (layer: number, which: 'compressor' | 'indexer') => Float32Array
}

/** Our compressor holding a pool of llama.cpp's: the main one (CSA, HCA) or the indexer. */
const ourCompressor = (pool: Pool): 'compressor' | 'indexer' => pool === 'lid' ? 'indexer' : 'compressor'

function f32Tensor (src: OurCache, name: string, rows: number, width: number): Float32Array {
  const t = src.tensor(name)
  if (t === undefined) throw new LlamaCppStateError('our cache', `no tensor ${name}`)
  if (t.dtype !== 'F32') throw new LlamaCppStateError('our cache', `${name} is ${t.dtype}, expected F32`)
  if (t.shape.length !== 2 || t.shape[0] !== rows || t.shape[1] !== width) {
    throw new LlamaCppStateError('our cache', `${name} has shape [${t.shape.join(', ')}], expected [${rows}, ${width}] after ${src.tokens.length} tokens`)
  }
  return t.data
}

/** K rows as llama.cpp stores them: rotated where it rotates, in the cache type. */
function kRows (rows: Float32Array, width: number, rotate: boolean, g: LlamaCppStateGeometry): Uint8Array {
  const v = rows.slice()
  if (rotate) ggmlHadamardRows(v, width, rotationSize(width))
  if (g.cacheType === 'F32') return new Uint8Array(v.buffer)
  const h = new Uint16Array(v.length)
  for (let i = 0; i < v.length; i++) h[i] = f32ToF16(v[i])
  return new Uint8Array(h.buffer)
}

const tensor = (type: number, width: number, rows: number, typeSize: number, data: Uint8Array): StateTensor =>
  ({ type, width, rows, rowSize: width * typeSize, data })

function windowSection (g: LlamaCppStateGeometry, src: OurCache, T: number): LlamaCppState['window'] {
  const { first } = windowPositions(T, g.slidingWindow)
  const count = T - first
  const held = Math.min(T, g.slidingWindow - 1)
  const cells: CellRecord[] = Array.from({ length: count }, (_, i) => ({ pos: first + i, seqIds: [0] }))
  const d = g.headDim
  const layers = g.layerRatios.map((_, i) => {
    const ours = f32Tensor(src, cacheTensorNames(i).window, held, d)
    // Cells in position order (llama.cpp's own order after a one-batch prefill into a fresh context).
    // The oldest cell, when there are `window` of them, is one no later query sees: we do not hold it.
    const rows = new Float32Array(count * d)
    rows.set(ours, (count - held) * d)
    const data = kRows(rows, d, rotates(g, 'window'), g)
    // zero rows stay zero through the rotation and the dtype
    return { type: ggmlTypeId(g.cacheType), rowSize: d * ggmlTypeSize(g.cacheType), data }
  })
  return { streams: [{ cells, vTrans: g.vTrans, layers }] }
}

function kCacheSection (g: LlamaCppStateGeometry, src: OurCache, T: number, pool: Pool): KCacheSection {
  const rows = Math.floor(T / poolRatio(pool))
  const width = poolWidth(g, pool)
  const layers = poolLayers(g, pool).map((il) => {
    const entries = f32Tensor(src, cacheTensorNames(il).pool(ourCompressor(pool)).compressedKv, rows, width)
    return { il, k: tensor(ggmlTypeId(g.cacheType), width, rows, ggmlTypeSize(g.cacheType), kRows(entries, width, rotates(g, pool), g)) }
  })
  return { version: K_CACHE_VERSION, rows, streams: 1, layers }
}

// The kv and score rings of one compressor: row = position mod ring size; the current partial
// window's tokens in full (score = gate + position bias, as llama.cpp adds it when it stores the
// row), the last complete window's first half from our carry, zeros where nothing is read again.
function ringSection (g: LlamaCppStateGeometry, src: OurCache, T: number, pool: Pool): RingSection {
  const ratio = poolRatio(pool)
  const size = ringSize(pool)
  const width = ringWidth(g, pool)
  const dim = poolWidth(g, pool)
  const buffered = T % ratio
  const layers = poolLayers(g, pool).map((il) => {
    const names = cacheTensorNames(il).pool(ourCompressor(pool))
    const bufKv = f32Tensor(src, names.bufferKv, buffered, width)
    const bufGate = f32Tensor(src, names.bufferGate, buffered, width)
    const hasCarry = pool !== 'hca' && T >= ratio
    const carryKv = hasCarry ? f32Tensor(src, names.overlapKv, ratio, dim) : null
    const carryGate = hasCarry ? f32Tensor(src, names.overlapGate, ratio, dim) : null
    const ape = src.positionBias(il, ourCompressor(pool))
    if (ape.length !== ratio * width) throw new LlamaCppStateError('our cache', `layer ${il} ${ourCompressor(pool)} position bias holds ${ape.length} values, expected ${ratio} x ${width}`)
    const kv = new Float32Array(size * width)
    const score = new Float32Array(size * width)
    for (let row = 0; row < size; row++) {
      const { pos, role } = ringRow(pool, T, row)
      if (role === 'live') {
        const j = pos % ratio
        kv.set(bufKv.subarray(j * width, (j + 1) * width), row * width)
        for (let c = 0; c < width; c++) score[row * width + c] = fround(bufGate[j * width + c] + ape[j * width + c])
      } else if (role === 'carry') {
        const j = pos % ratio
        kv.set(carryKv!.subarray(j * dim, (j + 1) * dim), row * width)
        score.set(carryGate!.subarray(j * dim, (j + 1) * dim), row * width)
      }
    }
    return {
      il,
      kv: tensor(GGML_F32, width, size, 4, new Uint8Array(kv.buffer)),
      score: tensor(GGML_F32, width, size, 4, new Uint8Array(score.buffer)),
    }
  })
  return { version: RING_VERSION, ratio, stateSize: size, width, streams: 1, layers }
}

/** llama.cpp's sequence state for `src` under geometry `g`. */
export function buildLlamaCppState (g: LlamaCppStateGeometry, src: OurCache): LlamaCppState {
  const T = src.tokens.length
  if (T < 1) throw new LlamaCppStateError('our cache', 'no tokens: there is no state to write')
  for (const t of src.tokens) {
    if (!Number.isInteger(t) || t < 0 || t >= g.vocabSize) throw new LlamaCppStateError('our cache', `token id ${t} is outside the vocabulary [0, ${g.vocabSize})`)
  }
  const cells: CellRecord[] = Array.from({ length: T }, (_, pos) => ({ pos, seqIds: [0] }))
  const kCaches = {} as LlamaCppState['kCaches']
  const rings = {} as LlamaCppState['rings']
  for (const p of POOLS) {
    kCaches[p] = kCacheSection(g, src, T, p)
    rings[p] = ringSection(g, src, T, p)
  }
  return {
    tokens: Int32Array.from(src.tokens),
    dsv4: { version: DSV4_VERSION, mode: DSV4_MODE_FULL },
    base: { streams: [{ cells, vTrans: g.vTrans, layers: [] }] },
    window: windowSection(g, src, T),
    kCaches,
    rings,
  }
}
