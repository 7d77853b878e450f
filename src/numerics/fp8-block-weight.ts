// DeepSeek's fp8 weight format: a [rows, cols] matrix of e4m3fn codes with one scale per 128x128
// tile (tiles at the right and bottom edges may be partial), scales laid out
// [ceil(rows/128), ceil(cols/128)] row-major. Dequantised value = e4m3(code) * scale of its tile.
// Two scale formats: float32 ("weight_scale_inv") and ue8m0 (e8m0 powers of two, as DeepSeek-V4).
import { E4M3_AMAX_FLOOR, ue8m0BlockScale } from './block-scale.ts'
import { checkOutLength } from './codes.ts'
import { E4M3_MAX, E4M3_NAN, E4M3_VALUES, f32ToE4m3 } from './e4m3.ts'
import { E8M0_NAN, E8M0_VALUES } from './e8m0.ts'
import { NumericsError } from '../errors.ts'

/** Side of a weight tile. */
export const FP8_WEIGHT_TILE = 128
/** Smallest float32 scale the float32 variant writes (the smallest normal float32, 2^-126). */
export const FP8_WEIGHT_MIN_SCALE = 2 ** -126

/** The fields both scale formats share. */
interface Fp8BlockWeightBase {
  /** Matrix rows. */
  rows: number
  /** Matrix columns. */
  cols: number
  /** rows * cols e4m3fn codes, row-major. */
  codes: Uint8Array
}

/** An fp8 block-scaled weight with float32 scales (scale_inv: dequantised = value * scale). */
export interface Fp8BlockWeightF32 extends Fp8BlockWeightBase {
  /** Scales are float32 values. */
  scaleFormat: 'f32'
  /** ceil(rows/128) * ceil(cols/128) float32 scales, row-major over tiles; NaN marks a non-finite tile. */
  scales: Float32Array
}

/** An fp8 block-scaled weight with ue8m0 scales (e8m0 codes, each a power of two). */
export interface Fp8BlockWeightUe8m0 extends Fp8BlockWeightBase {
  /** Scales are e8m0 codes. */
  scaleFormat: 'ue8m0'
  /** ceil(rows/128) * ceil(cols/128) e8m0 codes, row-major over tiles; 255 marks a non-finite tile. */
  scales: Uint8Array
}

/** An fp8 block-scaled weight in either scale format. */
export type Fp8BlockWeight = Fp8BlockWeightF32 | Fp8BlockWeightUe8m0

/** The scale tensor's shape for a [rows, cols] weight: [ceil(rows/128), ceil(cols/128)]. */
export function fp8WeightScaleShape (rows: number, cols: number): [number, number] {
  checkShape(rows, cols, 'fp8WeightScaleShape')
  return [Math.ceil(rows / FP8_WEIGHT_TILE), Math.ceil(cols / FP8_WEIGHT_TILE)]
}

function checkShape (rows: number, cols: number, what: string): void {
  if (!Number.isSafeInteger(rows) || rows < 0 || !Number.isSafeInteger(cols) || cols < 0) {
    throw new NumericsError(`${what}: shape [${String(rows)}, ${String(cols)}] is not two non-negative integers`)
  }
}

/** Largest magnitude in one tile, or NaN if the tile holds a NaN. */
function tileAmax (w: Float32Array, cols: number, r0: number, r1: number, c0: number, c1: number): number {
  let amax = 0
  for (let r = r0; r < r1; r++) {
    for (let i = r * cols + c0; i < r * cols + c1; i++) {
      const a = Math.abs(w[i])
      if (a > amax) amax = a
      else if (a !== a) return NaN
    }
  }
  return amax
}

/**
 * Quantise a row-major [rows, cols] float32 matrix to e4m3fn per 128x128 tile.
 * - 'f32' scales: s = max(fround(amax / 448), 2^-126) (so an all-zero tile stores 2^-126, never 0);
 * - 'ue8m0' scales: e8m0 code of 2^ceil(log2(fround(max(amax, fround(1e-4)) * fround(1/448)))),
 *   DeepSeek's round-scale-up rule (block-scale.ts).
 * Each code = f32ToE4m3(fround(w / s)), saturating at ±448. A tile holding NaN or ±Inf gets a
 * NaN scale (NaN, or e8m0 code 255) and NaN codes 0x7f.
 */
export function quantizeFp8BlockWeight (w: Float32Array, rows: number, cols: number, scaleFormat: 'f32'): Fp8BlockWeightF32
export function quantizeFp8BlockWeight (w: Float32Array, rows: number, cols: number, scaleFormat: 'ue8m0'): Fp8BlockWeightUe8m0
export function quantizeFp8BlockWeight (w: Float32Array, rows: number, cols: number, scaleFormat: 'f32' | 'ue8m0'): Fp8BlockWeight
export function quantizeFp8BlockWeight (w: Float32Array, rows: number, cols: number, scaleFormat: 'f32' | 'ue8m0'): Fp8BlockWeight {
  checkShape(rows, cols, 'quantizeFp8BlockWeight')
  if (w.length !== rows * cols) {
    throw new NumericsError(`quantizeFp8BlockWeight: ${w.length} values do not fill shape [${rows}, ${cols}]`)
  }
  if (scaleFormat !== 'f32' && scaleFormat !== 'ue8m0') {
    throw new NumericsError(`quantizeFp8BlockWeight: unknown scale format ${String(scaleFormat)}`)
  }
  const [tileRows, tileCols] = fp8WeightScaleShape(rows, cols)
  const codes = new Uint8Array(rows * cols)
  const f32Scales = new Float32Array(scaleFormat === 'f32' ? tileRows * tileCols : 0)
  const e8m0Scales = new Uint8Array(scaleFormat === 'ue8m0' ? tileRows * tileCols : 0)
  for (let tr = 0; tr < tileRows; tr++) {
    const r0 = tr * FP8_WEIGHT_TILE
    const r1 = Math.min(r0 + FP8_WEIGHT_TILE, rows)
    for (let tc = 0; tc < tileCols; tc++) {
      const c0 = tc * FP8_WEIGHT_TILE
      const c1 = Math.min(c0 + FP8_WEIGHT_TILE, cols)
      const amax = tileAmax(w, cols, r0, r1, c0, c1)
      let scale: number
      if (scaleFormat === 'f32') {
        scale = Number.isFinite(amax) ? Math.max(Math.fround(amax / E4M3_MAX), FP8_WEIGHT_MIN_SCALE) : NaN
        f32Scales[tr * tileCols + tc] = scale
      } else {
        const code = ue8m0BlockScale(amax, E4M3_MAX, E4M3_AMAX_FLOOR)
        e8m0Scales[tr * tileCols + tc] = code
        scale = code === E8M0_NAN ? NaN : E8M0_VALUES[code]
      }
      for (let r = r0; r < r1; r++) {
        for (let i = r * cols + c0; i < r * cols + c1; i++) {
          codes[i] = scale === scale ? f32ToE4m3(Math.fround(w[i] / scale)) : E4M3_NAN
        }
      }
    }
  }
  return scaleFormat === 'f32'
    ? { scaleFormat, rows, cols, codes, scales: f32Scales }
    : { scaleFormat, rows, cols, codes, scales: e8m0Scales }
}

/**
 * Dequantise an fp8 block-scaled weight to a row-major float32 matrix:
 * out[r, c] = fround(e4m3(codes[r, c]) * scale[floor(r/128), floor(c/128)]). With ue8m0 scales
 * the product is exact; with float32 scales it is the one float32 multiply torch does.
 */
export function dequantizeFp8BlockWeight (q: Fp8BlockWeight, out: Float32Array = new Float32Array(q.rows * q.cols)): Float32Array {
  const { rows, cols } = q
  checkShape(rows, cols, 'dequantizeFp8BlockWeight')
  const [tileRows, tileCols] = fp8WeightScaleShape(rows, cols)
  if (q.codes.length !== rows * cols) {
    throw new NumericsError(`dequantizeFp8BlockWeight: ${q.codes.length} codes do not fill shape [${rows}, ${cols}]`)
  }
  if (q.scales.length !== tileRows * tileCols) {
    throw new NumericsError(`dequantizeFp8BlockWeight: shape [${rows}, ${cols}] needs ${tileRows}x${tileCols} scales, got ${q.scales.length}`)
  }
  checkOutLength(out.length, rows * cols, 'dequantizeFp8BlockWeight')
  for (let r = 0; r < rows; r++) {
    const tileRowStart = Math.floor(r / FP8_WEIGHT_TILE) * tileCols
    for (let c = 0; c < cols; c++) {
      const s = tileRowStart + Math.floor(c / FP8_WEIGHT_TILE)
      const scale = q.scaleFormat === 'f32' ? q.scales[s] : E8M0_VALUES[q.scales[s]]
      out[r * cols + c] = Math.fround(E4M3_VALUES[q.codes[r * cols + c]] * scale)
    }
  }
  return out
}
