// The fast Walsh-Hadamard transform the DeepSeek reference applies to indexer vectors
// (`rotate_activation`: hadamard_transform(x, scale = n^-1/2)), in float32 with one fixed order.
//
// Order, for n = 2^L: L butterfly stages with strides h = 1, 2, 4, ..., n/2 (increasing). Stage h
// pairs every index j that has bit h clear with j + h and writes
//     x[j] = fround(x[j] + x[j+h]),   x[j+h] = fround(x[j] - x[j+h])
// (both from the values before the stage). The pairs of a stage are independent, so the loop
// order inside a stage does not matter; the stage order does (suites/profiles shows a row where
// the decreasing-stride order gives other bits). Then every element is multiplied once by
// s = fround(1 / sqrt(n)), rounded. The result is H_n x / sqrt(n) with H_n in Sylvester
// (natural) order: y_i = s * sum_j (-1)^popcount(i & j) x_j.
import { NumericsError } from '../../errors.ts'

const fround = Math.fround

/** The scale the transform applies: fround(1 / sqrt(n)) (2^-3.5 rounded to float32 for n = 128). */
export function hadamardScale (n: number): number {
  return fround(1 / Math.sqrt(n))
}

function isPowerOfTwo (n: number): boolean {
  return Number.isSafeInteger(n) && n >= 1 && (n & (n - 1)) === 0
}

/**
 * y = H_n x / sqrt(n) for x of length n, a power of two, in the order above. Writes into `out`
 * (length n; may be x itself) and returns it.
 */
export function hadamardTransform (x: Float32Array, out: Float32Array = new Float32Array(x.length)): Float32Array {
  const n = x.length
  if (!isPowerOfTwo(n) || n > 2 ** 30) throw new NumericsError(`hadamardTransform: length ${n} is not a power of two`)
  if (out.length !== n) throw new NumericsError(`hadamardTransform: out has ${out.length} elements, expected ${n}`)
  if (out !== x) out.set(x)
  for (let h = 1; h < n; h *= 2) {
    for (let start = 0; start < n; start += 2 * h) {
      for (let j = start; j < start + h; j++) {
        const a = out[j]
        const b = out[j + h]
        out[j] = fround(a + b)
        out[j + h] = fround(a - b)
      }
    }
  }
  const s = hadamardScale(n)
  for (let i = 0; i < n; i++) out[i] = fround(out[i] * s)
  return out
}
