// Rotating one head's rope slice by a table row, in fp32 steps: the reference the native rope kernel
// (src/kernels/rope-rows.ts) is checked against and the engine's own rope. Here, below the model and
// the kernels, so both use it without either importing the other.
import { NumericsError } from '../errors.ts'

const fround = Math.fround

/** ropeDim must be a positive even integer (pairs). */
export function checkRopeDim (ropeDim: number): void {
  if (!Number.isInteger(ropeDim) || ropeDim <= 0 || ropeDim % 2 !== 0) {
    throw new NumericsError(`rope: ropeDim must be a positive even integer, got ${ropeDim}`)
  }
}

/**
 * Rotate the interleaved pairs (2k, 2k+1) of x[offset .. offset + ropeDim) in place by table row
 * `row`: (a, b) -> (a*c - b*s, a*s + b*c), every product and sum rounded to fp32. `inverse` uses -s
 * (the conjugate rotation V4 applies to the attention output).
 */
export function applyRopeInterleaved (x: Float32Array, offset: number, ropeDim: number,
  cos: Float32Array, sin: Float32Array, row: number, inverse = false): void {
  checkRopeDim(ropeDim)
  const half = ropeDim / 2
  if (!Number.isInteger(offset) || offset < 0 || offset + ropeDim > x.length) {
    throw new NumericsError(`rope: slice [${offset}, ${offset + ropeDim}) does not fit in x of length ${x.length}`)
  }
  if (cos.length !== sin.length || cos.length % half !== 0) {
    throw new NumericsError(`rope: cos (${cos.length}) and sin (${sin.length}) must be equal multiples of ${half}`)
  }
  if (!Number.isInteger(row) || row < 0 || (row + 1) * half > cos.length) {
    throw new NumericsError(`rope: row ${row} is outside a table of ${cos.length / half} rows`)
  }
  const base = row * half
  for (let k = 0; k < half; k++) {
    const c = cos[base + k]
    const s = inverse ? -sin[base + k] : sin[base + k]
    const i = offset + 2 * k
    const a = x[i]
    const b = x[i + 1]
    x[i] = fround(fround(a * c) - fround(b * s))
    x[i + 1] = fround(fround(a * s) + fround(b * c))
  }
}
