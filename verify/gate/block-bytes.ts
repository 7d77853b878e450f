// Bytes the decoder's block store needs for one full window, for the store-size rule. A block at
// boundary b = (k+1)*bs holds, per layer (docs/decoder-cache.md): the window's rows of head_dim
// (mlx-lm's layout: `window` rows once b >= window, the oldest an unread slot, else b); per pool,
// the open buffers (b mod r rows of kv and gate, width 2d with overlap, else d), this block's pooled
// rows (floor(b/r) - floor(k*bs/r) of d), the CSA previous window (kv and gate, r rows of 2d, once
// b >= r) and an int64 [2] row range. The store cannot keep
// a tensor with a zero dimension or a None, so it writes a one-element stand-in instead
// (src/decode/store/encode.ts): float32 for None and for the window's zero-width values, the
// tensor's own dtype for an empty pooled delta. Floats take the decoder profile's element size
// (bf16: 2, f32: 4).
import { layerGeometries, type LayerGeometry } from '../../src/capture/payload.ts'
import type { SidecarJson } from '../../src/wire/sidecar-format.ts'

/** What a block file adds beyond its tensor data: header JSON and metadata. An upper allowance, per layer plus a base. */
export const HEADER_ALLOWANCE = { base: 8192, perLayer: 2048 } as const

/** The geometry fields the count needs (a sidecar.json has them all). */
export type BlockGeometry = Pick<SidecarJson, 'layers' | 'headDim' | 'indexHeadDim' | 'slidingWindow' | 'compressRates'>

/** Bytes of a one-element float32 stand-in (a None, or the zero-width window values). */
const F32_STAND_IN = 4

function layerBlockData (g: LayerGeometry, b: number, previous: number, e: number): number {
  const windowRows = b >= g.windowRows + 1 ? g.windowRows + 1 : Math.min(b, g.windowRows)
  let bytes = windowRows * g.headDim * e + F32_STAND_IN
  for (const p of g.pools) {
    const width = p.overlap ? 2 * p.dim : p.dim
    const open = b % p.ratio
    bytes += open > 0 ? open * width * 2 * e : 2 * F32_STAND_IN
    const rows = Math.floor(b / p.ratio) - Math.floor(previous / p.ratio)
    bytes += rows > 0 ? rows * p.dim * e : e
    bytes += p.overlap && b >= p.ratio ? 2 * p.ratio * width * e : 2 * F32_STAND_IN
    bytes += 2 * 8
  }
  return bytes
}

/** Tensor data bytes of block k (tokens [k*bs, (k+1)*bs)). */
export function blockDataBytes (geometry: BlockGeometry, blockSize: number, k: number, bytesPerValue: number): number {
  const b = (k + 1) * blockSize
  return layerGeometries(geometry).reduce((sum, g) => sum + layerBlockData(g, b, k * blockSize, bytesPerValue), 0)
}

/** The header allowance of one block of this geometry. */
export function blockHeaderAllowance (geometry: BlockGeometry): number {
  return HEADER_ALLOWANCE.base + HEADER_ALLOWANCE.perLayer * geometry.layers.length
}

/** The store bytes one full window of `window` tokens needs: its full blocks, data plus header allowance. */
export function windowStoreBytes (geometry: BlockGeometry, window: number, blockSize: number, bytesPerValue: number): { blocks: number, dataBytes: number, bytes: number } {
  const blocks = Math.floor(window / blockSize)
  let dataBytes = 0
  for (let k = 0; k < blocks; k++) dataBytes += blockDataBytes(geometry, blockSize, k, bytesPerValue)
  return { blocks, dataBytes, bytes: dataBytes + blocks * blockHeaderAllowance(geometry) }
}
