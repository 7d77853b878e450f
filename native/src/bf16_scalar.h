// Scalar float helpers shared by the kernels compiled once (not per ISA): bf16 rounding and the
// canonical NaN, the same rules as round_bf16.cc and src/kernels/output.ts.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace pdb {

// round_bf16.cc's rule for one value: RNE on the bits, NaN keeps its sign and becomes quiet.
inline float to_bf16 (float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  if ((b & 0x7f800000u) == 0x7f800000u && (b & 0x007fffffu) != 0) b = (b & 0x80000000u) | 0x7fc00000u;
  else b = (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&x, &b, 4);
  return x;
}

// Every kernel writes NaN as 0x7fc00000 (src/kernels/output.ts CANONICAL_NAN_BITS).
inline float canonical (float x) {
  if (std::isnan(x)) {
    const uint32_t b = 0x7fc00000u;
    std::memcpy(&x, &b, 4);
  }
  return x;
}

}  // namespace pdb
