// IEEE binary16 as ggml stores an F16 cache: float32 -> f16 rounds to nearest, ties to even
// (F16C's _cvtss_sh(x, 0) and ggml's scalar fallback agree), overflow to infinity, NaN kept.
const f32 = new Float32Array(1)
const u32 = new Uint32Array(f32.buffer)

export function f32ToF16 (x: number): number {
  f32[0] = x
  const b = u32[0]
  const sign = (b >>> 16) & 0x8000
  const exp = (b >>> 23) & 0xff
  const mant = b & 0x7fffff
  if (exp === 0xff) return sign | 0x7c00 | (mant !== 0 ? 0x200 | (mant >>> 13) : 0)
  const e = exp - 127 + 15
  if (e >= 0x1f) return sign | 0x7c00
  if (e <= 0) {
    if (e < -10) return sign
    // subnormal: shift the full mantissa (with its implicit 1) and round to nearest even
    const m = mant | 0x800000
    const shift = 14 - e
    const half = m >>> shift
    const rest = m & ((1 << shift) - 1)
    const mid = 1 << (shift - 1)
    return sign | (half + (rest > mid || (rest === mid && (half & 1) === 1) ? 1 : 0))
  }
  const half = (e << 10) | (mant >>> 13)
  const rest = mant & 0x1fff
  // a carry out of the mantissa correctly bumps the exponent (up to infinity)
  return sign | (half + (rest > 0x1000 || (rest === 0x1000 && (half & 1) === 1) ? 1 : 0))
}

export function f16ToF32 (h: number): number {
  const sign = (h & 0x8000) !== 0 ? -1 : 1
  const exp = (h >>> 10) & 0x1f
  const mant = h & 0x3ff
  if (exp === 0) return sign * mant * 2 ** -24
  if (exp === 0x1f) return mant !== 0 ? NaN : sign * Infinity
  return sign * (1 + mant / 1024) * 2 ** (exp - 15)
}
