// Block-scaled e2m1 (fp4): every `block` consecutive values share one e8m0 (power-of-two) scale,
// codes packed two per byte, low nibble first (e2m1-pack.ts). MXFP4 is block 32.
// Scale rule (block-scale.ts): s = 2^ceil(log2(max(amax, 6 * 2^-126) / 6)); element = saturating
// e2m1 of fround(x / s), ties to even.
import { blockAmax, E2M1_AMAX_FLOOR, MX_BLOCK, ue8m0BlockScale } from './block-scale.ts'
import { checkBlock, checkBlocks, checkOutLength } from './codes.ts'
import { E2M1_MAX, E2M1_VALUES, f32ToE2m1 } from './e2m1.ts'
import { packE2m1 } from './e2m1-pack.ts'
import { E8M0_NAN, E8M0_VALUES } from './e8m0.ts'
import { NumericsError } from '../errors.ts'

/** A block-scaled fp4 tensor, flattened: packed e2m1 codes plus one e8m0 scale code per block. */
export interface E2m1Blocks {
  /** e2m1 codes, two per byte, low nibble first; holds 2 * packed.length values. */
  packed: Uint8Array
  /** One e8m0 scale code per `block` values; code 255 (NaN) marks a block that held NaN or ±Inf. */
  scales: Uint8Array
  /** Values per scale (even). */
  block: number
}

/**
 * Quantise `x` (length a multiple of `block`; `block` even) in consecutive blocks to e2m1 with one
 * ue8m0 scale per block. Exactly: amax over the block; scale code
 * e8m0Ceil(fround(max(amax, 6 * 2^-126) * fround(1/6))), so an all-zero block gets 2^-126 (code 1)
 * and a block at the float32 maximum 2^126 (code 253); each code = f32ToE2m1(fround(x / s)),
 * round to nearest, ties to even, saturating at ±6. A block holding NaN or ±Inf gets scale 255
 * and codes 0.
 */
export function quantizeE2m1Blocks (x: Float32Array, block: number): E2m1Blocks {
  checkBlock(x.length, block, 'quantizeE2m1Blocks')
  if (block % 2 !== 0) throw new NumericsError(`quantizeE2m1Blocks: block size ${block} is odd, so blocks would split bytes`)
  const codes = new Uint8Array(x.length)
  const scales = new Uint8Array(x.length / block)
  for (let b = 0; b < scales.length; b++) {
    const start = b * block
    const end = start + block
    const scaleCode = ue8m0BlockScale(blockAmax(x, start, end), E2M1_MAX, E2M1_AMAX_FLOOR)
    scales[b] = scaleCode
    if (scaleCode === E8M0_NAN) continue
    const scale = E8M0_VALUES[scaleCode]
    for (let i = start; i < end; i++) codes[i] = f32ToE2m1(Math.fround(x[i] / scale))
  }
  return { packed: packE2m1(codes), scales, block }
}

/**
 * Dequantise block-scaled e2m1: value i = fround(e2m1(code i) * scale of its block), where code i
 * is the low nibble of byte i/2 for even i and the high nibble for odd i. Exact (a 2-bit
 * significand times a power of two never rounds; 0.5 * 2^-127 = 2^-128 is a float32 subnormal).
 */
export function dequantizeE2m1Blocks (q: E2m1Blocks, out: Float32Array = new Float32Array(q.packed.length * 2)): Float32Array {
  const count = q.packed.length * 2
  checkBlocks(count, q.scales.length, q.block, 'dequantizeE2m1Blocks')
  if (q.block % 2 !== 0) throw new NumericsError(`dequantizeE2m1Blocks: block size ${q.block} is odd, so blocks would split bytes`)
  checkOutLength(out.length, count, 'dequantizeE2m1Blocks')
  for (let b = 0; b < q.scales.length; b++) {
    const scale = E8M0_VALUES[q.scales[b]]
    // block is even, so a block starts on a byte boundary.
    for (let i = b * q.block; i < (b + 1) * q.block; i += 2) {
      const byte = q.packed[i >>> 1]
      out[i] = Math.fround(E2M1_VALUES[byte & 0xf] * scale)
      out[i + 1] = Math.fround(E2M1_VALUES[byte >>> 4] * scale)
    }
  }
  return out
}

/** MXFP4: `quantizeE2m1Blocks(x, 32)`. A [rows, cols] matrix with cols % 32 == 0 flattens row-major. */
export function quantizeMxfp4 (x: Float32Array): E2m1Blocks {
  return quantizeE2m1Blocks(x, MX_BLOCK)
}

/** MXFP4 dequantisation; the tensor must use blocks of 32. */
export function dequantizeMxfp4 (q: E2m1Blocks, out?: Float32Array): Float32Array {
  if (q.block !== MX_BLOCK) throw new NumericsError(`dequantizeMxfp4: block size ${q.block} is not ${MX_BLOCK}`)
  return dequantizeE2m1Blocks(q, out)
}
