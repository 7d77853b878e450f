// DeepseekV4UnweightedRMSNorm over rows, in place: argument checks and the Math.fround reference
// of the native unweightedNormRows (native/src/unweighted_norm.cc). Per row of d:
//   r = act(1 / sqrt(dot(x, x) / d + eps)), the dot in the lanes8 order (dotInKernelOrder)
//   x = act(x * r)
// every op rounded to float32, act = bf16 round to nearest even when bf16, else identity. NaN
// written canonical.
import { roundBf16 } from '../numerics/bf16.ts'
import { dotInKernelOrder } from './order.ts'
import { bitsView, storeOutput } from './output.ts'
import { checkBoolean, checkFinite, checkFloat32Shape, checkIntegers } from './validate.ts'

const fround = Math.fround

/** Checked unweightedNormRows arguments. */
export interface UnweightedNormArgs { x: Float32Array, rows: number, d: number, eps: number, bf16: boolean }

export function checkUnweightedNorm (kernel: string, x: unknown, rows: unknown, d: unknown, eps: unknown, bf16: unknown): UnweightedNormArgs {
  const [R, D] = checkIntegers(kernel, [['rows', rows, 0], ['d', d, 1]])
  const flag = checkBoolean(kernel, 'bf16', bf16)
  const e = checkFinite(kernel, 'eps', eps)
  const xs = checkFloat32Shape(kernel, 'x', x, [R, D], '[rows * d]')
  return { x: xs, rows: R, d: D, eps: e, bf16: flag }
}

/** Reference: x normalised in place; returns x. */
export function unweightedNormRows (x: Float32Array, rows: number, d: number, eps: number, bf16: boolean): Float32Array {
  const a = checkUnweightedNorm('reference.unweightedNormRows', x, rows, d, eps, bf16)
  const bits = bitsView(a.x)
  const eps32 = fround(a.eps)
  for (let r = 0; r < rows; r++) {
    const off = r * d
    const ss = dotInKernelOrder(a.x, off, a.x, off, d)
    let f = fround(1 / fround(Math.sqrt(fround(fround(ss / d) + eps32))))
    if (a.bf16) f = roundBf16(f)
    for (let i = off; i < off + d; i++) storeOutput(a.x, bits, i, fround(a.x[i] * f), a.bf16)
  }
  return a.x
}
