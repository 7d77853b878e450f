// MLX's own exp, sin and cos on the CPU (backend/cpu/simd/math.h:28-120), Cephes polynomials in
// float32 with std::fma: every step rounded where the C++ rounds. Not correctly rounded functions
// (exp matches the correctly rounded value on about 25 % of inputs), which is why they are ported.
import { bitsToF32 as bitsToF32Imported } from '../bits.ts'
import { fma32 as fma32Imported } from './f32.ts'

// Hot loops call local bindings: test runners rewrite imported names as property reads.
const fma32 = fma32Imported
const bitsToF32 = bitsToF32Imported
const fround = Math.fround

const LOG2E = fround(1.442695)
const EXP_POLY = [1.339887440266574e-3, 9.618437357674640e-3, 5.550332471162809e-2,
  2.402264791363012e-1, 6.931472028550421e-1, 1.0].map(fround)
const EXP_P0 = fround(1.535336188319500e-4)

/** simd::exp on a float32 (also what softmax, sigmoid and logsumexp call). */
export function mlxExp (xInit: number): number {
  if (Number.isNaN(xInit)) return xInit
  if (xInit > 88) return Infinity
  if (xInit < -88) return 0
  const x = fround(xInit * LOG2E)
  // `floor(x + 0.5)`: 0.5 is a double literal, so the add and the floor happen in double.
  const ipart = Math.floor(x + 0.5)
  const fpart = fround(x - ipart)
  let p = EXP_P0
  for (const c of EXP_POLY) p = fma32(p, fpart, c)
  // 2^ipart built from the exponent bits (ipart = -127 gives the bit pattern 0, i.e. 0.0).
  const epart = bitsToF32(((ipart + 127) << 23) >>> 0)
  return fround(epart * p)
}

const FOUR_OVER_PI = fround(1.27323954473516)
const DP1 = fround(-0.78515625)
const DP2 = fround(-2.4187564849853515625e-4)
// Cephes' literal as written (more digits than a double holds); fround takes it to float32 anyway.
// eslint-disable-next-line no-loss-of-precision
const DP3 = fround(-3.77489497744594108e-8)
const S1 = fround(2.443315711809948e-5)
const S2 = fround(-1.388731625493765e-3)
const S3 = fround(4.166664568298827e-2)
const C1 = fround(-1.9515295891e-4)
const C2 = fround(8.3321608736e-3)
const C3 = fround(-1.6666654611e-1)
/** sincos_checked hands |x| > 2^23 to libm; the cache path never gets there. */
const CEPHES_LIMIT = 8388608

function sincos (xIn: number, sine: boolean): number {
  if (Math.abs(xIn) > CEPHES_LIMIT) {
    throw new RangeError(`mlx-cpu sin/cos: |${xIn}| > 2^23 goes to glibc's sinf/cosf in MLX, not ported`)
  }
  let signSin = xIn < 0
  let x = Math.abs(xIn)
  const yScaled = fround(x * FOUR_OVER_PI)
  // uint32 conversion truncates; then j = (j + 1) & ~1 as the Cephes sources do.
  const emm2 = ((Math.trunc(yScaled) + 1) & ~1) >>> 0
  const y = emm2
  const polyMask = (emm2 & 2) !== 0
  x = fma32(y, DP1, x)
  x = fma32(y, DP2, x)
  x = fma32(y, DP3, x)
  signSin = signSin !== ((emm2 & 4) !== 0)
  const signCos = (((emm2 - 2) >>> 0) & 4) !== 0
  const z = fround(x * x)
  let y1 = fma32(z, S1, S2)
  let y2 = fma32(z, C1, C2)
  y1 = fma32(y1, z, S3)
  y2 = fma32(y2, z, C3)
  y1 = fround(y1 * z)
  y2 = fround(y2 * z)
  y1 = fround(y1 * z)
  y2 = fma32(x, y2, x)
  y1 = fma32(z, -0.5, y1)
  y1 = fround(y1 + 1)
  if (sine) {
    const ys = polyMask ? y1 : y2
    return signSin ? -ys : ys
  }
  const yc = polyMask ? y2 : y1
  return signCos ? yc : -yc
}

/** simd::sin on a float32 (|x| <= 2^23). */
export function mlxSin (x: number): number {
  return sincos(x, true)
}

/** simd::cos on a float32 (|x| <= 2^23). */
export function mlxCos (x: number): number {
  return sincos(x, false)
}
