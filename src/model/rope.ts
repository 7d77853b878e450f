// RoPE / YaRN tables for DeepSeek-V4, in fp32 with Math.fround after every operation, so the table
// is one exact artefact that every part of the bridge (and its fingerprint) agrees on bit for bit.
import { createHash } from 'node:crypto'
import { NumericsError } from '../errors.ts'
import type { RopeParams } from './config/types.ts'
import { checkRopeDim } from '../numerics/rope-apply.ts'

// Lives in numerics so the kernels' references can use it without importing the model.
export { applyRopeInterleaved } from '../numerics/rope-apply.ts'

const fround = Math.fround

/** A cos/sin table: row r holds position start + r, column k rope pair k; [count, ropeDim / 2]. */
export interface RopeTable {
  cos: Float32Array
  sin: Float32Array
}

/**
 * YaRN's correction range {low, high} in pair indices, or null when YaRN is off
 * (originalMaxPositionEmbeddings null). Computed in double like the references:
 * cd(beta) = dim * ln(L / (beta * 2 * pi)) / (2 * ln theta); low = max(floor(cd(betaFast)), 0),
 * high = min(ceil(cd(betaSlow)), dim - 1) (no floor/ceil when truncate is false). Only those two
 * clamps: low is not capped at dim - 1 and high is not raised to 0, as in the references. The ramp's
 * low == high nudge (+0.001) is not applied here.
 */
export function yarnCorrectionRange (p: RopeParams): { low: number, high: number } | null {
  const original = p.originalMaxPositionEmbeddings
  if (original === null) return null
  checkRopeDim(p.ropeDim)
  const dim = p.ropeDim
  const correctionDim = (beta: number) => (dim * Math.log(original / (beta * 2 * Math.PI))) / (2 * Math.log(p.theta))
  let low = correctionDim(p.betaFast)
  let high = correctionDim(p.betaSlow)
  if (p.truncate) {
    low = Math.floor(low)
    high = Math.ceil(high)
  }
  // `+ 0` turns a -0 from ceil(-0.x) into the 0 Python's int would give.
  return { low: Math.max(low, 0) + 0, high: Math.min(high, dim - 1) + 0 }
}

/**
 * Inverse frequencies, one per rope pair (length ropeDim / 2):
 * f_k = 1 / theta^(2k / dim), each step rounded to fp32. YaRN is applied whenever
 * originalMaxPositionEmbeddings is set (not gated on sequence length):
 * ramp_k = clamp((k - low) / (high - low), 0, 1), smooth = 1 - ramp,
 * f_k <- (f_k / factor) * (1 - smooth) + f_k * smooth. No attention factor here.
 */
export function ropeInvFreq (p: RopeParams): Float32Array {
  checkRopeDim(p.ropeDim)
  if (!(p.theta > 0)) throw new NumericsError(`rope: theta must be > 0, got ${p.theta}`)
  const dim = p.ropeDim
  const half = dim / 2
  const theta = fround(p.theta)
  const inv = new Float32Array(half)
  for (let k = 0; k < half; k++) {
    const exponent = fround((2 * k) / dim)
    inv[k] = fround(1 / fround(Math.pow(theta, exponent)))
  }
  const range = yarnCorrectionRange(p)
  if (range === null) return inv
  if (!(p.factor > 0)) throw new NumericsError(`rope: YaRN factor must be > 0, got ${p.factor}`)
  const high = range.low === range.high ? range.high + 0.001 : range.high
  const span = fround(high - range.low)
  const low = fround(range.low)
  const factor = fround(p.factor)
  for (let k = 0; k < half; k++) {
    const ramp = Math.min(Math.max(fround(fround(k - low) / span), 0), 1)
    const smooth = fround(1 - ramp)
    const interpolated = fround(inv[k] / factor)
    inv[k] = fround(fround(interpolated * fround(1 - smooth)) + fround(inv[k] * smooth))
  }
  return inv
}

/**
 * cos and sin for `positions` (a count from 0, or {start, count}): angle = fp32(fp32(pos) * f_k),
 * cos = fp32(Math.cos(angle)). Math.cos is V8's own fdlibm port, identical on every host; glibc's
 * cosf (or a GPU's) is not used on purpose. When attentionFactor != 1 both are multiplied by it
 * (fp32), as transformers does; V4 configs have 1.
 */
export function ropeTable (p: RopeParams, positions: number | { start: number, count: number }): RopeTable {
  const { start, count } = typeof positions === 'number' ? { start: 0, count: positions } : positions
  if (!Number.isSafeInteger(start) || start < 0 || !Number.isSafeInteger(count) || count < 0) {
    throw new NumericsError(`rope: positions must be non-negative integers, got start ${start}, count ${count}`)
  }
  const inv = ropeInvFreq(p)
  const half = inv.length
  const cos = new Float32Array(count * half)
  const sin = new Float32Array(count * half)
  const scale = fround(p.attentionFactor)
  const scaled = p.attentionFactor !== 1
  for (let row = 0; row < count; row++) {
    const pos = fround(start + row)
    for (let k = 0; k < half; k++) {
      const angle = fround(pos * inv[k])
      let c = fround(Math.cos(angle))
      let s = fround(Math.sin(angle))
      if (scaled) {
        c = fround(c * scale)
        s = fround(s * scale)
      }
      cos[row * half + k] = c
      sin[row * half + k] = s
    }
  }
  return { cos, sin }
}

/**
 * sha256 (hex) over a version tag, the parameters and maxPos as canonical JSON (sorted keys), and
 * the exact little-endian bits of ropeInvFreq(p). Two geometries share a fingerprint only if they
 * build the same table over [0, maxPos).
 */
export function ropeFingerprint (p: RopeParams, maxPos: number): string {
  if (!Number.isSafeInteger(maxPos) || maxPos < 0) {
    throw new NumericsError(`rope: maxPos must be a non-negative integer, got ${maxPos}`)
  }
  const inv = ropeInvFreq(p)
  const fields: Record<string, unknown> = {
    attentionFactor: p.attentionFactor,
    betaFast: p.betaFast,
    betaSlow: p.betaSlow,
    factor: p.factor,
    maxPos,
    originalMaxPositionEmbeddings: p.originalMaxPositionEmbeddings,
    partialRotaryFactor: p.partialRotaryFactor,
    ropeDim: p.ropeDim,
    ropeType: p.ropeType,
    theta: p.theta,
    truncate: p.truncate,
  }
  const bytes = new Uint8Array(inv.length * 4)
  const view = new DataView(bytes.buffer)
  for (let k = 0; k < inv.length; k++) view.setFloat32(4 * k, inv[k], true)
  return createHash('sha256')
    .update('pd-bridge/rope-fingerprint/v1\n')
    .update(JSON.stringify(fields))
    .update('\n')
    .update(bytes)
    .digest('hex')
}
