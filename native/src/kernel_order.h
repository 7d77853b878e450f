// The one accumulation order every pdb_kernels dot product uses (docs/kernels.md, "Accumulation order").
//
// For a dot product of length k:
//   1. 8 lanes, each starting at +0. Lane l sums fround(x[i] * w[i]) for i = l, l+8, l+16, ...
//      while i < k8 = k - k % 8, in increasing i, one rounded add per product.
//   2. The lanes meet in a fixed tree:  ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)).
//   3. The k % 8 leftover products are added to that sum one by one, in increasing i.
// One F8 (simd8.h: a __m256, or 8 floats in the portable build) holds the 8 lanes; the tree is
// exactly the usual 256 -> 128 -> 64 -> 32 bit halving.
// The TypeScript reference (src/kernels/order.ts) spells out the same steps with Math.fround.
#pragma once

#include <cstdint>
#include <cstring>

#include "simd8.h"

namespace pdb {
namespace PDB_ISA_NS {

// Every NaN a kernel writes is this quiet NaN: NaN sign and payload depend on which
// operand the hardware picked, which the JavaScript reference cannot mirror.
constexpr uint32_t kCanonicalNanBits = 0x7fc00000u;

// Step 2 of the order: the fixed lane tree.
inline float lane_tree (F8 lanes) { return f8_lane_tree(lanes); }

// Weight storage: how 8 weights are loaded as float32 lanes, and how one is read for the tail.
struct WeightF32 {
  using Code = float;
  static constexpr size_t kCodesPerLine = 16;   // per 64-byte cache line (the kernels' prefetch hints)
  static F8 load8 (const float* p) { return f8_load(p); }
  static float load1 (const float* p) { return *p; }
};

// bf16 codes widen exactly: the code becomes the top 16 bits of a float32.
struct WeightBf16 {
  using Code = uint16_t;
  static constexpr size_t kCodesPerLine = 32;   // per 64-byte cache line (the kernels' prefetch hints)
  static F8 load8 (const uint16_t* p) { return f8_load_bf16(p); }
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
inline F8 round_bf16_8 (F8 v) {
  const I8 b = f8_bits(v);
  const I8 odd = i8_shr<16>(b) & i8_set1(1);
  const I8 r = ((b + i8_set1(0x7fff)) + odd) & i8_set1(0xffff0000u);
  return f8_blend(i8_as_f8(r), i8_as_f8(i8_set1(kCanonicalNanBits)), f8_unord(v, v));
}

// round_bf16 for one value, NaN made canonical first (see round_bf16_8).
inline float round_bf16_nan_safe (float f) {
  if ((float_bits(f) & 0x7fffffffu) > 0x7f800000u) return bits_float(kCanonicalNanBits);
  return round_bf16(f);
}

// The same for 8 outputs at once (no bf16 rounding: only RMSNorm uses it).
inline F8 canonical_nan8 (F8 v) {
  return f8_blend(v, i8_as_f8(i8_set1(kCanonicalNanBits)), f8_unord(v, v));
}

// A whole dot product in the kernel order (used where no register tiling is needed).
template <class W>
inline float dot_in_order (const float* x, const typename W::Code* w, size_t k) {
  const size_t k8 = k - k % 8;
  F8 lanes = f8_zero();
  for (size_t i = 0; i < k8; i += 8) lanes = lanes + f8_load(x + i) * W::load8(w + i);
  float s = lane_tree(lanes);
  for (size_t i = k8; i < k; i++) s = s + x[i] * W::load1(w + i);
  return s;
}

}  // namespace PDB_ISA_NS
}  // namespace pdb
