// The element-wise functions of fmath.ts over a whole array: argument checks and the reference.
import { NumericsError } from '../errors.ts'
import { FMATH_FUNCTIONS } from './fmath.ts'
import type { FmathName } from './fmath.ts'
import { bitsView, storeOutput } from './output.ts'
import { checkArray, checkSameOrNoOverlap, checkShape } from './validate.ts'

/** Checked fmathArray arguments; out may be x itself (element-wise, read before written). */
export function checkFmathArray (kernel: string, name: unknown, x: unknown, out: unknown): { name: FmathName, x: Float32Array, out: Float32Array } {
  if (typeof name !== 'string' || !Object.hasOwn(FMATH_FUNCTIONS, name)) {
    throw new NumericsError(`${kernel}: name must be one of ${Object.keys(FMATH_FUNCTIONS).join(', ')}, got ${String(name)}`)
  }
  const xs = checkArray(kernel, 'x', x, 'Float32Array')
  let o: Float32Array
  if (out === undefined) {
    o = new Float32Array(xs.length)
  } else {
    o = checkArray(kernel, 'out', out, 'Float32Array')
    checkShape(kernel, 'out', o, [xs.length], '[length of x]')
    checkSameOrNoOverlap(kernel, o, xs)
  }
  return { name: name as FmathName, x: xs, out: o }
}

/** Reference: out[i] = FMATH_FUNCTIONS[name](x[i]), NaN written canonical. Returns out. */
export function fmathArray (name: FmathName, x: Float32Array, out?: Float32Array): Float32Array {
  const a = checkFmathArray('reference.fmathArray', name, x, out)
  const f = FMATH_FUNCTIONS[a.name]
  const bits = bitsView(a.out)
  for (let i = 0; i < a.x.length; i++) storeOutput(a.out, bits, i, f(a.x[i]), false)
  return a.out
}
