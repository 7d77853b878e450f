// The one accumulation order every pdb_kernels dot product uses (docs/kernels.md, "Accumulation order").
//
// For a dot product of length k:
//   1. 8 lanes, each starting at +0. Lane l sums fround(x[i] * w[i]) for i = l, l+8, l+16, ...
//      while i < k8 = k - k % 8, in increasing i, one rounded add per product.
//   2. The lanes meet in a fixed tree:  ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)).
//   3. The k % 8 leftover products are added to that sum one by one, in increasing i.
// One __m256 holds the 8 lanes; the tree is exactly the usual 256 -> 128 -> 64 -> 32 bit halving.
// The TypeScript reference (src/kernels/order.ts) spells out the same steps with Math.fround.
#pragma once

#include <immintrin.h>
#include <cstdint>
#include <cstring>

namespace pdb {

// Every NaN a kernel writes is this quiet NaN: NaN sign and payload depend on which
// operand the hardware picked, which the JavaScript reference cannot mirror.
constexpr uint32_t kCanonicalNanBits = 0x7fc00000u;

inline uint32_t float_bits (float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

inline float bits_float (uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

// Step 2 of the order: the fixed lane tree.
inline float lane_tree (__m256 lanes) {
  const __m128 lo = _mm256_castps256_ps128(lanes);
  const __m128 hi = _mm256_extractf128_ps(lanes, 1);
  const __m128 s = _mm_add_ps(lo, hi);                       // [l0+l4, l1+l5, l2+l6, l3+l7]
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));       // [s0+s2, s1+s3, ., .]
  const __m128 u = _mm_add_ss(t, _mm_shuffle_ps(t, t, 1));   // t0 + t1
  return _mm_cvtss_f32(u);
}

// Weight storage: how 8 weights are loaded as float32 lanes, and how one is read for the tail.
struct WeightF32 {
  using Code = float;
  static __m256 load8 (const float* p) { return _mm256_loadu_ps(p); }
  static float load1 (const float* p) { return *p; }
};

// bf16 codes widen exactly: the code becomes the top 16 bits of a float32.
struct WeightBf16 {
  using Code = uint16_t;
  static __m256 load8 (const uint16_t* p) {
    const __m128i codes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(codes), 16));
  }
  static float load1 (const uint16_t* p) { return bits_float(uint32_t(*p) << 16); }
};

// Round a float32 to the nearest bf16 value, ties to even (NaN is handled by the caller).
inline float round_bf16 (float f) {
  const uint32_t b = float_bits(f);
  return bits_float((b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u);
}

// The last step of every output element: optional bf16 rounding, then NaN made canonical.
inline float finish_output (float s, bool to_bf16) {
  if ((float_bits(s) & 0x7fffffffu) > 0x7f800000u) return bits_float(kCanonicalNanBits);
  return to_bf16 ? round_bf16(s) : s;
}

// round_bf16 for 8 lanes; NaN lanes become the canonical NaN (the carry could turn a NaN with
// a low payload into Inf, and a NaN is made canonical at the output anyway).
inline __m256 round_bf16_8 (__m256 v) {
  const __m256i b = _mm256_castps_si256(v);
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
  const __m256i r = _mm256_and_si256(_mm256_add_epi32(_mm256_add_epi32(b, _mm256_set1_epi32(0x7fff)), odd),
                                     _mm256_set1_epi32(int(0xffff0000u)));
  const __m256 is_nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  return _mm256_blendv_ps(_mm256_castsi256_ps(r), _mm256_castsi256_ps(_mm256_set1_epi32(int(kCanonicalNanBits))), is_nan);
}

// round_bf16 for one value, NaN made canonical first (see round_bf16_8).
inline float round_bf16_nan_safe (float f) {
  if ((float_bits(f) & 0x7fffffffu) > 0x7f800000u) return bits_float(kCanonicalNanBits);
  return round_bf16(f);
}

// The same for 8 outputs at once (no bf16 rounding: only RMSNorm uses it).
inline __m256 canonical_nan8 (__m256 v) {
  const __m256 is_nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  return _mm256_blendv_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(int(kCanonicalNanBits))), is_nan);
}

// A whole dot product in the kernel order (used where no register tiling is needed).
template <class W>
inline float dot_in_order (const float* x, const typename W::Code* w, size_t k) {
  const size_t k8 = k - k % 8;
  __m256 lanes = _mm256_setzero_ps();
  for (size_t i = 0; i < k8; i += 8) {
    lanes = _mm256_add_ps(lanes, _mm256_mul_ps(_mm256_loadu_ps(x + i), W::load8(w + i)));
  }
  float s = lane_tree(lanes);
  for (size_t i = k8; i < k; i++) s = s + x[i] * W::load1(w + i);
  return s;
}

}  // namespace pdb
