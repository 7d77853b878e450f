// Whether every product of some float32 x values and some bf16 weight codes is exact in float32
// (docs/kernels.md, "Decode tile": exact products). Where it is, a fused multiply-add gives the same
// bits as the lanes8 order's rounded multiply then rounded add: fma(x, w, a) rounds x*w + a once, and
// round(x*w) = x*w adds nothing to round. The decode tile then spends one instruction per step
// instead of two.
//
// A nonzero finite bf16 value is S * 2^(E' - 134): S an integer below 2^8, E' its exponent field,
// or 1 for a subnormal. So a product of two is an integer below 2^16 times 2^(Ex' + Ew' - 268): it
// is a float32, and exact, when that unit is at least 2^-149 (Ex' + Ew' >= 119) and the product
// is below 2^128 (Ex + Ew <= 380). Zeros give exact (signed) zeros. An x that is not a bf16 value
// (any of its low 16 bits set), an infinity or a NaN on either side, or a range outside those
// bounds: not exact, and the caller keeps the two rounded operations.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(PDB_ISA_AVX512)
#include <immintrin.h>
#endif

namespace pdb {
namespace PDB_ISA_NS {
namespace exact {

// The exponent fields of a set of values' nonzero magnitudes: the largest field, and the smallest
// field (1 for a subnormal); `ok` false when a value rules fused steps out (inf, NaN, non-bf16 x).
struct Range {
  bool ok = true;
  bool any = false;       // some nonzero value
  unsigned max_field = 0;
  unsigned min_field = 255;
};

// From the largest magnitude and (smallest nonzero magnitude - 1), wrapping zero to all ones: the
// same bit patterns for float32 (shift 23) and bf16 (shift 7).
inline Range range_from (uint32_t max_mag, uint32_t min_mag_less1, uint32_t all_ones, unsigned shift) {
  Range r;
  if (min_mag_less1 == all_ones) return r;           // all zeros
  r.any = true;
  r.max_field = max_mag >> shift;
  const unsigned min_field = (min_mag_less1 + 1) >> shift;
  r.min_field = min_field == 0 ? 1 : min_field;
  if (r.max_field >= 255) r.ok = false;              // inf or NaN
  return r;
}

// x values [0, count): every one a bf16 value (low 16 bits zero), and their range.
inline Range x_range (const float* x, size_t count) {
  uint32_t low = 0, max_mag = 0, min_less1 = 0xffffffffu;
  size_t i = 0;
#if defined(PDB_ISA_AVX512)
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), low_mask = _mm512_set1_epi32(0xffff),
                one = _mm512_set1_epi32(1);
  __m512i vlow = _mm512_setzero_si512(), vmax = _mm512_setzero_si512(), vmin = _mm512_set1_epi32(-1);
  for (; i + 16 <= count; i += 16) {
    const __m512i b = _mm512_loadu_si512(x + i);
    const __m512i mag = _mm512_and_si512(b, abs_mask);
    vlow = _mm512_or_si512(vlow, _mm512_and_si512(b, low_mask));
    vmax = _mm512_max_epu32(vmax, mag);
    vmin = _mm512_min_epu32(vmin, _mm512_sub_epi32(mag, one));
  }
  low = uint32_t(_mm512_reduce_or_epi32(vlow));
  max_mag = uint32_t(_mm512_reduce_max_epu32(vmax));
  min_less1 = uint32_t(_mm512_reduce_min_epu32(vmin));
#endif
  for (; i < count; i++) {
    uint32_t b;
    std::memcpy(&b, x + i, 4);
    const uint32_t mag = b & 0x7fffffffu;
    low |= b & 0xffffu;
    if (mag > max_mag) max_mag = mag;
    if (mag - 1 < min_less1) min_less1 = mag - 1;
  }
  Range r = range_from(max_mag, min_less1, 0xffffffffu, 23);
  if (low != 0) r.ok = false;
  return r;
}

// Weight rows [c0, c0 + nc) of row length k, codes [k0, k0 + len).
inline Range w_range (const uint16_t* w, size_t k, size_t c0, size_t nc, size_t k0, size_t len) {
  uint32_t max_mag = 0, min_less1 = 0xffffu;
#if defined(PDB_ISA_AVX512)
  const __m512i abs_mask = _mm512_set1_epi16(0x7fff), one = _mm512_set1_epi16(1);
  __m512i vmax = _mm512_setzero_si512(), vmin = _mm512_set1_epi16(-1);
#endif
  for (size_t c = 0; c < nc; c++) {
    const uint16_t* src = w + (c0 + c) * k + k0;
    size_t i = 0;
#if defined(PDB_ISA_AVX512)
    for (; i + 32 <= len; i += 32) {
      const __m512i mag = _mm512_and_si512(_mm512_loadu_si512(src + i), abs_mask);
      vmax = _mm512_max_epu16(vmax, mag);
      vmin = _mm512_min_epu16(vmin, _mm512_sub_epi16(mag, one));
    }
#endif
    for (; i < len; i++) {
      const uint32_t mag = src[i] & 0x7fffu;
      if (mag > max_mag) max_mag = mag;
      if (uint16_t(mag - 1) < min_less1) min_less1 = uint16_t(mag - 1);
    }
  }
#if defined(PDB_ISA_AVX512)
  alignas(64) uint16_t hi[32], lo[32];
  _mm512_store_si512(hi, vmax);
  _mm512_store_si512(lo, vmin);
  for (int j = 0; j < 32; j++) {
    if (hi[j] > max_mag) max_mag = hi[j];
    if (lo[j] < min_less1) min_less1 = lo[j];
  }
#endif
  return range_from(max_mag, min_less1, 0xffffu, 7);
}

// Every product of a value in x's range with one in w's is exact in float32.
inline bool products_exact (const Range& x, const Range& w) {
  if (!x.ok || !w.ok) return false;
  if (!x.any || !w.any) return true;                 // every product is a signed zero
  return x.min_field + w.min_field >= 119 && x.max_field + w.max_field <= 380;
}

}  // namespace exact
}  // namespace PDB_ISA_NS
}  // namespace pdb
