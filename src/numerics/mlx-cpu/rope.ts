// mx.fast.rope(traditional=True, freqs=…) on MLX's CPU (the fallback graph, fast.cpp:434-518) and
// the freqs DeepseekV4RoPE passes it, computed the way the model computes them: float32 mx ops.
import { mlxCos as mlxCosImported, mlxSin as mlxSinImported } from './cephes.ts'
import { mlxPowF32 } from './pow.ts'
import { MLX_CPU, rounder, type RoundingPoints } from './rounding-points.ts'

// Hot loops call local bindings: test runners rewrite imported names as property reads.
const fround = Math.fround
const mlxCos = mlxCosImported
const mlxSin = mlxSinImported

/** YaRN as DeepseekV4RoPE reads it (rope_scaling). */
export interface MlxYarn {
  factor: number
  originalMaxPositionEmbeddings: number
  betaFast: number
  betaSlow: number
}

/**
 * DeepseekV4RoPE's `_freqs` (1/inv_freq, float32) for `dims` rotated channels, YaRN-blended when
 * `yarn` is set; then `_get_freqs(headDim)`: divided by `freqScale` (the compressor's ratio) and
 * prefixed with +inf for the (headDim - dims)/2 pairs that are not rotated.
 */
export function deepseekV4RopeFreqs (dims: number, base: number, yarn: MlxYarn | null, freqScale: number, headDim: number): Float32Array {
  const half = dims / 2
  let inv = new Float32Array(half)
  // 1.0 / (base ** (arange(0, dims, 2) / dims)), each op a float32 op.
  for (let i = 0; i < half; i++) inv[i] = fround(1 / mlxPowF32(base, fround(fround(2 * i) / dims)))
  if (yarn !== null) {
    // correction_dim, floor, ceil: Python floats (double), as in the model.
    const correctionDim = (rotations: number): number =>
      dims * Math.log(yarn.originalMaxPositionEmbeddings / (rotations * 2 * Math.PI)) / (2 * Math.log(base))
    const low = Math.max(Math.floor(correctionDim(yarn.betaFast)), 0)
    let high = Math.min(Math.ceil(correctionDim(yarn.betaSlow)), dims - 1)
    if (low === high) high += 0.001
    const span = fround(high - low)
    const blended = new Float32Array(half)
    for (let i = 0; i < half; i++) {
      const ramp = fround(fround(i - low) / span)
      const smooth = fround(1 - Math.min(Math.max(ramp, 0), 1))
      // inv_freq / factor * (1 - smooth) + inv_freq * smooth, left to right.
      const scaled = fround(fround(inv[i] / fround(yarn.factor)) * fround(1 - smooth))
      blended[i] = fround(scaled + fround(inv[i] * smooth))
    }
    inv = blended
  }
  const nope = (headDim - dims) / 2
  const freqs = new Float32Array(headDim / 2).fill(Infinity)
  for (let i = 0; i < half; i++) {
    const f = fround(1 / inv[i])
    freqs[nope + i] = freqScale === 1 ? f : fround(f / freqScale)
  }
  return freqs
}

/** The rope's inverse frequencies: reciprocal(freqs) = f32(1/f); +inf gives 0 (no rotation). */
export function ropeInvFreqs (freqs: Float32Array): Float32Array {
  return freqs.map((f) => fround(1 / f))
}

/**
 * One row of D bf16 values rotated in place as position `position` (traditional: pairs 2i, 2i+1):
 * θ = f32(f32(position) · inv); c, s = Cephes cos/sin rounded to bf16;
 * even = bf16(bf16(x1·c) − bf16(x2·s)), odd = bf16(bf16(x1·s) + bf16(x2·c)) (the roundings are `points.rope`'s).
 */
export function mlxRopeRow (x: Float32Array, xo: number, invFreqs: Float32Array, position: number, points: RoundingPoints = MLX_CPU): void {
  const table = rounder(points.rope.tables)
  const product = rounder(points.rope.product)
  const result = rounder(points.rope.result)
  // positions = (arange(T) + offset) · 1.0 in float32.
  const pos = fround(fround(position) * 1)
  for (let i = 0; i < invFreqs.length; i++) {
    const theta = fround(pos * invFreqs[i])
    const c = table(mlxCos(theta))
    const s = table(mlxSin(theta))
    const x1 = x[xo + 2 * i]
    const x2 = x[xo + 2 * i + 1]
    x[xo + 2 * i] = result(product(x1 * c) - product(x2 * s))
    x[xo + 2 * i + 1] = result(product(x1 * s) + product(x2 * c))
  }
}
