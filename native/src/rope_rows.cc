#include "rope_rows.h"

#include "kernel_order.h"
#include "parallel.h"

namespace pdb {

namespace {

// [v0, v1, v2, v3] -> [v0, v0, v1, v1, v2, v2, v3, v3]: one table entry per interleaved pair.
inline __m256 pairs_of (const float* p) {
  const __m128 v = _mm_loadu_ps(p);
  return _mm256_set_m128(_mm_unpackhi_ps(v, v), _mm_unpacklo_ps(v, v));
}

void rotate (float* x, size_t half, const float* cos, const float* sin, bool inverse) {
  const __m256 sign = _mm256_set1_ps(inverse ? -0.0f : 0.0f);
  size_t k = 0;
  for (; k + 4 <= half; k += 4) {
    const __m256 v = _mm256_loadu_ps(x + 2 * k);                        // a0 b0 a1 b1 ...
    const __m256 c = pairs_of(cos + k);
    const __m256 s = _mm256_xor_ps(pairs_of(sin + k), sign);
    const __m256 ac = _mm256_mul_ps(v, c);                              // a c, b c
    const __m256 bs = _mm256_mul_ps(_mm256_permute_ps(v, 0xb1), s);     // b s, a s
    _mm256_storeu_ps(x + 2 * k, canonical_nan8(_mm256_addsub_ps(ac, bs)));  // a c - b s, b c + a s
  }
  for (; k < half; k++) {
    const float c = cos[k];
    const float s = inverse ? -sin[k] : sin[k];
    const float a = x[2 * k], b = x[2 * k + 1];
    x[2 * k] = finish_output(a * c - b * s, false);
    x[2 * k + 1] = finish_output(a * s + b * c, false);
  }
}

}  // namespace

void rope_rows (float* x, size_t rows, size_t heads, size_t head_dim, size_t offset, size_t rope_dim,
                const float* cos, const float* sin, const int32_t* table_rows, bool inverse, int threads) {
  const size_t half = rope_dim / 2;
  parallel_ranges(rows, 1, threads, [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; r++) {
      const size_t tr = size_t(table_rows[r]) * half;
      for (size_t h = 0; h < heads; h++) rotate(x + (r * heads + h) * head_dim + offset, half, cos + tr, sin + tr, inverse);
    }
  });
}

}  // namespace pdb
