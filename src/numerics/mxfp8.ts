// Block-scaled e4m3: every `block` consecutive values share one e8m0 (power-of-two) scale.
// MXFP8 is block 32. The scale rule is DeepSeek's act_quant with ue8m0 scales (block-scale.ts):
// s = 2^ceil(log2(max(amax, 1e-4) / 448)); element = saturating e4m3 of fround(x / s).
import { blockAmax, E4M3_AMAX_FLOOR, MX_BLOCK, ue8m0BlockScale } from './block-scale.ts'
import { checkBlock, checkBlocks, checkOutLength } from './codes.ts'
import { E4M3_MAX, E4M3_NAN, E4M3_VALUES, f32ToE4m3 } from './e4m3.ts'
import { E8M0_NAN, E8M0_VALUES } from './e8m0.ts'
import { NumericsError } from '../errors.ts'

/** A block-scaled fp8 tensor, flattened: element codes plus one e8m0 scale code per block. */
export interface E4m3Blocks {
  /** One e4m3fn code per value. */
  codes: Uint8Array
  /** One e8m0 scale code per `block` values; code 255 (NaN) marks a block that held NaN or ±Inf. */
  scales: Uint8Array
  /** Values per scale. */
  block: number
}

/**
 * Quantise `x` (length a multiple of `block`) in consecutive blocks of `block` values to e4m3
 * with one ue8m0 scale per block. Exactly: amax over the block; scale code
 * e8m0Ceil(fround(max(amax, fround(1e-4)) * fround(1/448))); each code = f32ToE4m3(fround(x / s)),
 * which saturates at ±448. A block holding NaN or ±Inf gets scale 255 and codes 0x7f (NaN).
 */
export function quantizeE4m3Blocks (x: Float32Array, block: number): E4m3Blocks {
  checkBlock(x.length, block, 'quantizeE4m3Blocks')
  const codes = new Uint8Array(x.length)
  const scales = new Uint8Array(x.length / block)
  for (let b = 0; b < scales.length; b++) {
    const start = b * block
    const end = start + block
    const scaleCode = ue8m0BlockScale(blockAmax(x, start, end), E4M3_MAX, E4M3_AMAX_FLOOR)
    scales[b] = scaleCode
    if (scaleCode === E8M0_NAN) {
      codes.fill(E4M3_NAN, start, end)
      continue
    }
    const scale = E8M0_VALUES[scaleCode]
    for (let i = start; i < end; i++) codes[i] = f32ToE4m3(Math.fround(x[i] / scale))
  }
  return { codes, scales, block }
}

/**
 * Dequantise block-scaled e4m3: out[i] = fround(e4m3(codes[i]) * scale of its block). Exact:
 * a 4-bit significand times a power of two >= 2^-127 never rounds. NaN scale gives NaN.
 */
export function dequantizeE4m3Blocks (q: E4m3Blocks, out: Float32Array = new Float32Array(q.codes.length)): Float32Array {
  checkBlocks(q.codes.length, q.scales.length, q.block, 'dequantizeE4m3Blocks')
  checkOutLength(out.length, q.codes.length, 'dequantizeE4m3Blocks')
  for (let b = 0; b < q.scales.length; b++) {
    const scale = E8M0_VALUES[q.scales[b]]
    for (let i = b * q.block; i < (b + 1) * q.block; i++) out[i] = Math.fround(E4M3_VALUES[q.codes[i]] * scale)
  }
  return out
}

/** MXFP8 (e4m3 elements): `quantizeE4m3Blocks(x, 32)`. */
export function quantizeMxfp8 (x: Float32Array): E4m3Blocks {
  return quantizeE4m3Blocks(x, MX_BLOCK)
}

/** MXFP8 dequantisation; the tensor must use blocks of 32. */
export function dequantizeMxfp8 (q: E4m3Blocks, out?: Float32Array): Float32Array {
  if (q.block !== MX_BLOCK) throw new NumericsError(`dequantizeMxfp8: block size ${q.block} is not ${MX_BLOCK}`)
  return dequantizeE4m3Blocks(q, out)
}
