// llama.cpp's rotation of K rows, computed as its CPU backend computes it (ggml-cpu ops.cpp
// ggml_compute_forward_fwht: the Hadamard-hinted mul_mat): each block of n values scaled by
// 1/sqrtf(n) first, then in-place butterflies (u + v, u - v) for len = 1, 2, 4, ... in float32.
// The SIMD passes are elementwise (u - v as fma(v, -1, u) is exact), so the order is fixed and this
// reproduces it bit for bit. Equal to the orthonormal Sylvester matrix ggml_gen_hadamard builds.
// A clearly named transform of our rows into llama.cpp's layout, not a change to our arithmetic.
const fround = Math.fround

/** Rotate `rows` ([rows, width], in place) in blocks of `n` (a power of two dividing width). */
export function ggmlHadamardRows (rows: Float32Array, width: number, n: number): void {
  if ((n & (n - 1)) !== 0 || width % n !== 0) throw new RangeError(`hadamard: block ${n} must be a power of two dividing the width ${width}`)
  const scale = fround(1 / fround(Math.sqrt(n)))
  for (let b = 0; b < rows.length; b += n) {
    for (let j = 0; j < n; j++) rows[b + j] = fround(rows[b + j] * scale)
    for (let len = 1; len < n; len <<= 1) {
      for (let i = 0; i < n; i += 2 * len) {
        for (let j = 0; j < len; j++) {
          const u = rows[b + i + j]
          const v = rows[b + i + len + j]
          rows[b + i + j] = u + v
          rows[b + i + len + j] = u - v
        }
      }
    }
  }
}
