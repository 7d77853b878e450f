#include "round_bf16.h"

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "parallel.h"

namespace pdb {

namespace {

inline uint32_t round_bits (uint32_t b) {
  if ((b & 0x7f800000u) == 0x7f800000u && (b & 0x007fffffu) != 0) return (b & 0x80000000u) | 0x7fc00000u;
  return (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
}

void round_range (float* x, size_t i0, size_t i1) {
  size_t i = i0;
  const __m256i exp_mask = _mm256_set1_epi32(0x7f800000);
  const __m256i man_mask = _mm256_set1_epi32(0x007fffff);
  const __m256i sign_mask = _mm256_set1_epi32(int32_t(0x80000000u));
  const __m256i quiet = _mm256_set1_epi32(0x7fc00000);
  const __m256i bias = _mm256_set1_epi32(0x7fff);
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i high = _mm256_set1_epi32(int32_t(0xffff0000u));
  const __m256i zero = _mm256_setzero_si256();
  for (; i + 8 <= i1; i += 8) {
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
    // Wrapping 32-bit adds, as the scalar form (and the TypeScript reference's `| 0`).
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), one);
    const __m256i rounded = _mm256_and_si256(_mm256_add_epi32(_mm256_add_epi32(b, bias), lsb), high);
    const __m256i is_nan = _mm256_andnot_si256(
      _mm256_cmpeq_epi32(_mm256_and_si256(b, man_mask), zero),
      _mm256_cmpeq_epi32(_mm256_and_si256(b, exp_mask), exp_mask));
    const __m256i nan = _mm256_or_si256(_mm256_and_si256(b, sign_mask), quiet);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(x + i), _mm256_blendv_epi8(rounded, nan, is_nan));
  }
  for (; i < i1; i++) {
    uint32_t b;
    std::memcpy(&b, x + i, 4);
    b = round_bits(b);
    std::memcpy(x + i, &b, 4);
  }
}

}  // namespace

void round_bf16_array (float* x, size_t n, int threads) {
  parallel_ranges(n, 64, threads, [&](size_t i0, size_t i1) { round_range(x, i0, i1); });
}

}  // namespace pdb
