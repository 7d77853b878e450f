// mx.quantize on MLX 0.32.2's CPU backend, bit for bit, for bf16 weights [rows, cols] (row-major,
// quantized along cols in groups). A plain Math.fround-style reference; the rules:
//
// - mxfp8, group 32 (ops.cpp:5101-5190, fp_quantize's fallback, which the CPU always runs as
//   ordinary bf16 ops): s = bf16(amax / bf16(448)); e = s == 0 ? 0 : rint(bf16(log2f(s)))
//   (ties to even); w' = bf16(w / bf16(2^e)); code = ToFP8(w') (unary_ops.h:120, round to nearest
//   even, saturating to 0x7E); scale byte = uint8(e + 127). Codes are viewed as uint32 words, so
//   each word holds four codes little-endian in k order.
// - affine, bits 2/4/8, group 32/64/128 (backend/cpu/quantized.cpp:1149-1212, fast::Quantize's CPU
//   kernel, all float32): w_max/w_min (std::max/std::min, first wins on ties);
//   scale = max((w_max − w_min) / n_bins, 1e-7f), negated unless |w_min| > |w_max|; edge = w_min or
//   w_max likewise; q0 = rint(edge / scale); if q0 ≠ 0 { scale = edge / q0; bias = edge } else
//   bias = 0; q = clamp(rint((w − bias) / scale), 0, n_bins) with the float32 scale; word |= q <<
//   (k·bits) over 32/bits codes; the stored scale and bias are bf16(scale), bf16(bias).
import { bf16 as bf16Imported } from './bf16-round.ts'

const bf16 = bf16Imported
const fround = Math.fround

/** std::rint under the default rounding mode: nearest, ties to even. */
export function rint (x: number): number {
  const r = Math.round(x)
  return r - x === 0.5 && r % 2 !== 0 ? r - 1 : r
}

const scratchF = new Float32Array(1)
const scratchU = new Uint32Array(scratchF.buffer)

function f32Bits (x: number): number {
  scratchF[0] = x
  return scratchU[0]
}

function f32FromBits (u: number): number {
  scratchU[0] = u
  return scratchF[0]
}

const FP8_MAX_BITS = 543 << 21
const DENORM_MASK = 141 << 23
const DENORM_F = f32FromBits(DENORM_MASK)
const HIGH_BIAS = (((7 - 127) << 23) >>> 0) + 0x7ffff

/**
 * detail::ToFP8 (unary_ops.h:120) for a float32 value: e4m3 with round to nearest even, values of
 * 464 and more (and inf, NaN) saturate to 0x7E (448), the sign bit kept.
 */
export function toFp8 (x: number): number {
  const bits = f32Bits(x)
  const sign = bits & 0x80000000
  const f = (bits ^ sign) >>> 0
  let result: number
  if (f >= FP8_MAX_BITS) result = 0x7e
  else if (f < (121 << 23)) {
    // Small values: add 2^14 in float32 so the hardware rounds the mantissa, then subtract the bits.
    const low = f32Bits(fround(f32FromBits(f) + DENORM_F))
    result = ((low - DENORM_MASK) >>> 0) & 0xff
  }
  else {
    const mantOdd = (f >>> 20) & 1
    result = (((f + HIGH_BIAS + mantOdd) >>> 0) >>> 20) & 0xff
  }
  return result | (sign >>> 24)
}

/** Bytes as MLX's uint32 words: byte 4i + j is bits 8j..8j+7 of word i (little-endian). */
export function packBytes (bytes: Uint8Array): Uint32Array {
  if (bytes.length % 4 !== 0) throw new Error(`packBytes: ${bytes.length} bytes is not whole words`)
  const out = new Uint32Array(bytes.length / 4)
  for (let i = 0; i < out.length; i++) {
    out[i] = (bytes[4 * i] | (bytes[4 * i + 1] << 8) | (bytes[4 * i + 2] << 16) | (bytes[4 * i + 3] << 24)) >>> 0
  }
  return out
}

/** mx.quantize(w, mode="mxfp8"): [rows, cols/4] words, their bytes (one code each), [rows, cols/32] e8m0 bytes. */
export interface MxQuantized {
  /** [rows, cols/4] uint32 words, as MLX stores the weight. */
  packed: Uint32Array
  /** [rows, cols] e4m3 codes (the words' little-endian bytes). */
  codes: Uint8Array
  /** [rows, cols/32] e8m0 exponent bytes (e + 127). */
  scales: Uint8Array
  rows: number
  cols: number
}

/** The e8m0 exponent e of one group's bf16 amax (before the +127). */
export function mxfp8Exponent (amax: number): number {
  const s = bf16(fround(amax / 448))
  if (s === 0) return 0
  // log2f of a bf16 value, rounded to float32, then to bf16 (the Log2 op on bf16), then rint.
  return rint(bf16(fround(Math.log2(s))))
}

/** mx.quantize(w, group_size=32, bits=8, mode="mxfp8") on MLX's CPU; `w` holds bf16 values. */
export function mxfp8Quantize (w: Float32Array, rows: number, cols: number): MxQuantized {
  if (w.length !== rows * cols) throw new Error(`mxfp8Quantize: ${w.length} values for [${rows}, ${cols}]`)
  if (cols % 32 !== 0) throw new Error(`mxfp8Quantize: ${cols} columns is not a multiple of the group size 32`)
  const groups = w.length / 32
  const codes = new Uint8Array(w.length)
  const scales = new Uint8Array(groups)
  for (let g = 0; g < groups; g++) {
    const o = g * 32
    let amax = 0
    for (let i = o; i < o + 32; i++) {
      const a = Math.abs(w[i])
      if (a > amax || a !== a) amax = a
    }
    const e = mxfp8Exponent(amax)
    const pow2 = bf16(fround(2 ** e))
    for (let i = o; i < o + 32; i++) codes[i] = toFp8(bf16(fround(w[i] / pow2)))
    scales[g] = (e + 127) & 0xff
  }
  return { packed: packBytes(codes), codes, scales, rows, cols }
}

/** mx.quantize(w, mode="affine"): [rows, cols·bits/32] words, bf16 scales and biases per group. */
export interface AffineQuantized {
  /** [rows, cols·bits/32] uint32 words, as MLX stores the weight. */
  packed: Uint32Array
  /** [rows, cols] the unpacked codes, one per element in k order. */
  codes: Uint8Array
  /** [rows, cols/groupSize] bf16 values. */
  scales: Float32Array
  biases: Float32Array
  rows: number
  cols: number
  bits: number
  groupSize: number
}

const AFFINE_EPS = fround(1e-7)

/** mx.quantize(w, group_size, bits, mode="affine") on MLX's CPU; `w` holds bf16 values. */
export function affineQuantize (w: Float32Array, rows: number, cols: number, bits = 8, groupSize = 64): AffineQuantized {
  if (w.length !== rows * cols) throw new Error(`affineQuantize: ${w.length} values for [${rows}, ${cols}]`)
  if (![32, 64, 128].includes(groupSize)) throw new Error(`affineQuantize: group size ${groupSize} (MLX supports 32, 64, 128)`)
  if (![2, 4, 8].includes(bits)) throw new Error(`affineQuantize: ${bits} bits (only the power-of-two widths 2, 4, 8 are ported)`)
  if (cols % groupSize !== 0) throw new Error(`affineQuantize: ${cols} columns is not a multiple of the group size ${groupSize}`)
  const nBins = (1 << bits) - 1
  const groups = w.length / groupSize
  const codes = new Uint8Array(w.length)
  const scales = new Float32Array(groups)
  const biases = new Float32Array(groups)
  for (let g = 0; g < groups; g++) {
    const o = g * groupSize
    let wMax = -Infinity
    let wMin = Infinity
    for (let i = o; i < o + groupSize; i++) {
      const v = w[i]
      if (wMax < v) wMax = v // std::max(w_max, v)
      if (v < wMin) wMin = v // std::min(w_min, v)
    }
    const mask = Math.abs(wMin) > Math.abs(wMax)
    let scale = fround(fround(wMax - wMin) / nBins)
    if (scale < AFFINE_EPS) scale = AFFINE_EPS
    if (!mask) scale = -scale
    const edge = mask ? wMin : wMax
    const q0 = rint(fround(edge / scale))
    let bias = 0
    if (q0 !== 0) {
      scale = fround(edge / q0)
      bias = edge
    }
    for (let i = o; i < o + groupSize; i++) {
      let q = rint(fround(fround(w[i] - bias) / scale))
      q = q < 0 ? 0 : q // std::max(q, 0.0f)
      q = nBins < q ? nBins : q // std::min(q, n_bins)
      codes[i] = q
    }
    scales[g] = bf16(scale)
    biases[g] = bf16(bias)
  }
  const perWord = 32 / bits
  const packed = new Uint32Array(w.length / perWord)
  for (let i = 0; i < packed.length; i++) {
    let word = 0
    for (let k = 0; k < perWord; k++) word |= codes[i * perWord + k] << (k * bits)
    packed[i] = word >>> 0
  }
  return { packed, codes, scales, biases, rows, cols, bits, groupSize }
}
