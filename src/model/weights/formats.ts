// Load-time weight formats: quantise a [rows, cols] matrix into the profile's format, dequantise,
// and keep the dequantised values in the narrowest container that holds them exactly, so the
// existing batch-invariant matmuls run them unchanged.
//   mxfp8 / mxfp4: blocks of 32 along the input dim (each row), ue8m0 scales (src/numerics)
//   fp8-block128: e4m3 in 128x128 tiles with ue8m0 scales, DeepSeek-V4's checkpoint layout
// Every MX or ue8m0-fp8 value is a <= 4-bit significand times a power of two >= 2^-22 (the scale
// floors), so it is a bf16 value; bf16Codes() checks that per tensor and the f32 container is
// the fallback where it would not hold.
import { CheckpointError } from '../../errors.ts'
import { BF16_QUIET_NAN, decodeBf16, encodeBf16 } from '../../numerics/bf16.ts'
import { MX_BLOCK } from '../../numerics/block-scale.ts'
import { dequantizeFp8BlockWeight, quantizeFp8BlockWeight } from '../../numerics/fp8-block-weight.ts'
import { dequantizeMxfp4, quantizeMxfp4 } from '../../numerics/mxfp4.ts'
import { dequantizeMxfp8, quantizeMxfp8 } from '../../numerics/mxfp8.ts'
import type { WeightFormat } from '../profiles/types.ts'

/** A weight matrix as held after load. */
export type HeldMatrix =
  | { container: 'bf16', codes: Uint16Array }
  | { container: 'f32', values: Float32Array }

/** A checkpoint matrix before preparation: its bf16 codes, or its float32 values. */
export type SourceMatrix = { dtype: 'BF16', codes: Uint16Array } | { dtype: 'F32', values: Float32Array }

/**
 * The bf16 codes of `values` if every value is exactly a bf16 value (low 16 bits zero; any NaN
 * counts: it becomes the quiet bf16 NaN of its sign), else null.
 */
export function bf16Codes (values: Float32Array): Uint16Array | null {
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length)
  const codes = new Uint16Array(values.length)
  for (let i = 0; i < bits.length; i++) {
    const b = bits[i]
    if ((b & 0xffff) === 0) codes[i] = b >>> 16
    else if ((b & 0x7fffffff) > 0x7f800000) codes[i] = ((b >>> 16) & 0x8000) | BF16_QUIET_NAN
    else return null
  }
  return codes
}

/** The float32 values of a source matrix (a fresh array for bf16 codes, the shared view for F32). */
function sourceValues (src: SourceMatrix): Float32Array {
  return src.dtype === 'BF16' ? decodeBf16(src.codes) : src.values
}

/** The values a quantised format leaves after quantise -> dequantise of `w` ([rows, cols] row-major). */
export function quantizeDequantize (w: Float32Array, rows: number, cols: number, format: 'mxfp8' | 'mxfp4' | 'fp8-block128', tensor: string): Float32Array {
  if (format === 'fp8-block128') return dequantizeFp8BlockWeight(quantizeFp8BlockWeight(w, rows, cols, 'ue8m0'))
  if (cols % MX_BLOCK !== 0) {
    throw new CheckpointError(tensor, `${format} needs the input dim to be a multiple of ${MX_BLOCK}, but it is ${cols}`)
  }
  // cols % 32 == 0, so the flat row-major blocks of 32 run along each row's input dim.
  return format === 'mxfp8' ? dequantizeMxfp8(quantizeMxfp8(w)) : dequantizeMxfp4(quantizeMxfp4(w))
}

function narrowest (values: Float32Array): HeldMatrix {
  const codes = bf16Codes(values)
  return codes === null ? { container: 'f32', values } : { container: 'bf16', codes }
}

/**
 * A [rows, cols] checkpoint matrix held in `format`:
 * - 'f32': the exact values, in their own container (bf16 codes stay shared, F32 stays a shared view);
 * - 'bf16': bf16 codes (F32 values rounded to nearest, ties to even);
 * - quantised formats: quantised from the float32 values, dequantised, narrowest exact container.
 */
export function holdMatrix (src: SourceMatrix, rows: number, cols: number, format: WeightFormat, tensor: string): HeldMatrix {
  switch (format) {
    case 'f32':
      return src.dtype === 'BF16' ? { container: 'bf16', codes: src.codes } : { container: 'f32', values: src.values }
    case 'bf16':
      return { container: 'bf16', codes: src.dtype === 'BF16' ? src.codes : encodeBf16(src.values) }
    case 'mxfp8':
    case 'mxfp4':
    case 'fp8-block128':
      return narrowest(quantizeDequantize(sourceValues(src), rows, cols, format, tensor))
  }
}

/** The held values as a new float32 array. */
export function heldValues (m: HeldMatrix): Float32Array {
  return m.container === 'bf16' ? decodeBf16(m.codes) : Float32Array.from(m.values)
}
