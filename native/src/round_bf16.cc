#include <cstdint>
#include <cstring>

#include "isa_kernels.h"
#include "parallel.h"
#include "simd8.h"

namespace pdb {
namespace PDB_ISA_NS {

namespace {

inline uint32_t round_bits (uint32_t b) {
  if ((b & 0x7f800000u) == 0x7f800000u && (b & 0x007fffffu) != 0) return (b & 0x80000000u) | 0x7fc00000u;
  return (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
}

void round_range (float* x, size_t i0, size_t i1) {
  size_t i = i0;
  const I8 exp_mask = i8_set1(0x7f800000u);
  const I8 man_mask = i8_set1(0x007fffffu);
  const I8 sign_mask = i8_set1(0x80000000u);
  const I8 quiet = i8_set1(0x7fc00000u);
  const I8 bias = i8_set1(0x7fffu);
  const I8 one = i8_set1(1u);
  const I8 high = i8_set1(0xffff0000u);
  const I8 zero = i8_set1(0u);
  for (; i + 8 <= i1; i += 8) {
    const I8 b = i8_load(x + i);
    // Wrapping 32-bit adds, as the scalar form (and the TypeScript reference's `| 0`).
    const I8 lsb = i8_shr<16>(b) & one;
    const I8 rounded = ((b + bias) + lsb) & high;
    const I8 is_nan = i8_andnot(i8_eq(b & man_mask, zero), i8_eq(b & exp_mask, exp_mask));
    const I8 nan = (b & sign_mask) | quiet;
    i8_store(x + i, i8_blend(rounded, nan, is_nan));
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

}  // namespace PDB_ISA_NS
}  // namespace pdb
