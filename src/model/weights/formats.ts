// Load-time weight formats: quantise a [rows, cols] matrix into the profile's format, dequantise,
// and keep the dequantised values in the narrowest container that holds them exactly, so the
// existing batch-invariant matmuls run them unchanged.
//   mxfp8 / mxfp4: blocks of 32 along the input dim (each row), ue8m0 scales (src/numerics)
//   fp8-block128: e4m3 in 128x128 tiles with ue8m0 scales, DeepSeek-V4's checkpoint layout
// Every MX or ue8m0-fp8 value is a <= 4-bit significand times a power of two >= 2^-22 (the scale
// floors), so it is a bf16 value; exactBf16Codes() checks that per tensor and the f32 container is
// the fallback where it would not hold.
// The whole-tensor loops run in native kernels (src/kernels: mxRoundTrip, decodeBf16Array,
// exactBf16Codes; their references are the src/numerics functions this file called before):
// in JavaScript they were about 30 s of a decoder's start on this 2-core machine.
import { CheckpointError } from '../../errors.ts'
import { decodeBf16Array, exactBf16Codes, mxRoundTrip, type MxElement } from '../../kernels/index.ts'
import { encodeBf16 } from '../../numerics/bf16.ts'
import { MX_BLOCK } from '../../numerics/block-scale.ts'
import { dequantizeFp8BlockWeight, quantizeFp8BlockWeight } from '../../numerics/fp8-block-weight.ts'
import type { WeightFormat } from '../profiles/types.ts'

/** A weight matrix as held after load. */
export type HeldMatrix =
  | { container: 'bf16', codes: Uint16Array }
  | { container: 'f32', values: Float32Array }

/** A checkpoint matrix before preparation: its bf16 codes, or its float32 values. */
export type SourceMatrix = { dtype: 'BF16', codes: Uint16Array } | { dtype: 'F32', values: Float32Array }

/** The float32 values of a source matrix (a fresh array for bf16 codes, the shared view for F32). */
function sourceValues (src: SourceMatrix): Float32Array {
  return src.dtype === 'BF16' ? decodeBf16Array(src.codes) : src.values
}

/** The element format of an MX weight format, once the input dim is known to hold whole blocks. */
function mxElement (format: 'mxfp8' | 'mxfp4', cols: number, tensor: string): MxElement {
  if (cols % MX_BLOCK !== 0) {
    throw new CheckpointError(tensor, `${format} needs the input dim to be a multiple of ${MX_BLOCK}, but it is ${cols}`)
  }
  // cols % 32 == 0, so the flat row-major blocks of 32 run along each row's input dim.
  return format === 'mxfp8' ? 'e4m3' : 'e2m1'
}

/** The values a quantised format leaves after quantise -> dequantise of `w` ([rows, cols] row-major). */
export function quantizeDequantize (w: Float32Array, rows: number, cols: number, format: 'mxfp8' | 'mxfp4' | 'fp8-block128', tensor: string): Float32Array {
  if (format === 'fp8-block128') return dequantizeFp8BlockWeight(quantizeFp8BlockWeight(w, rows, cols, 'ue8m0'))
  return mxRoundTrip(w, MX_BLOCK, mxElement(format, cols, tensor))
}

/**
 * Values per piece of an MX matrix's load (a multiple of MX_BLOCK). The pieces pass through one
 * float32 buffer, kept: a whole matrix's float32 copy and its round trip would be fresh memory
 * (7 GB for the 1.8 GB test checkpoint), which this VM faults in at about 0.4 s a GB.
 */
export const MX_PIECE = 1 << 21
let mxScratch: Float32Array | undefined

/** quantizeDequantize then exactBf16Codes of a source matrix, piece by piece: its bf16 codes, or null. */
function mxCodes (src: SourceMatrix, element: MxElement): Uint16Array | null {
  const length = src.dtype === 'BF16' ? src.codes.length : src.values.length
  const held = new Uint16Array(length)
  const scratch = (mxScratch ??= new Float32Array(MX_PIECE))
  for (let at = 0; at < length; at += MX_PIECE) {
    const end = Math.min(at + MX_PIECE, length)
    const piece = scratch.subarray(0, end - at)
    const values = src.dtype === 'BF16' ? decodeBf16Array(src.codes.subarray(at, end), piece) : src.values.subarray(at, end)
    if (exactBf16Codes(mxRoundTrip(values, MX_BLOCK, element, piece), held.subarray(at, end)) === null) return null
  }
  return held
}

function narrowest (values: Float32Array): HeldMatrix {
  const codes = exactBf16Codes(values)
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
    case 'mxfp4': {
      // Every MX value is bf16 (see the top), so the whole-matrix fallback below never runs for them.
      const codes = mxCodes(src, mxElement(format, cols, tensor))
      if (codes !== null) return { container: 'bf16', codes }
      return narrowest(quantizeDequantize(sourceValues(src), rows, cols, format, tensor))
    }
    case 'fp8-block128':
      return narrowest(quantizeDequantize(sourceValues(src), rows, cols, format, tensor))
  }
}

/** The held values as a new float32 array. */
export function heldValues (m: HeldMatrix): Float32Array {
  return m.container === 'bf16' ? decodeBf16Array(m.codes) : Float32Array.from(m.values)
}
