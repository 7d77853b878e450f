#include "mx_round_trip.h"

#include <cstdint>
#include <cstring>

#include "parallel.h"

namespace pdb {

namespace {

constexpr uint32_t kCanonicalNan = 0x7fc00000u;
constexpr uint32_t kE8m0Nan = 255;

inline uint32_t bits_of (float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}

inline float float_of (uint32_t b) {
  float x;
  std::memcpy(&x, &b, 4);
  return x;
}

// One element format: the minifloat's mantissa bits, smallest normal exponent and largest value,
// and the scale rule's constants (src/numerics/block-scale.ts).
struct Format {
  uint32_t man_bits;
  int min_exp;
  float emax;
  float amax_floor;
  float inv_max;  // float(1 / emax), multiplied as ue8m0BlockScale does
};

// Math.fround(1e-4) and fround(1 / 448): double first, then float, as the TypeScript constants.
const Format kE4m3 = {3, -6, 448.0f, float(1e-4), float(1.0 / 448.0)};
const Format kE2m1 = {1, 0, 6.0f, 0x1.8p-124f, float(1.0 / 6.0)};

// e8m0Ceil for a non-negative float32 or NaN: the code of the smallest power of two >= x.
inline uint32_t e8m0_ceil (float x) {
  const uint32_t abs = bits_of(x) & 0x7fffffffu;
  if (abs > 0x7f800000u) return kE8m0Nan;
  if (abs <= 0x00400000u) return 0;  // 2^-127 and below
  if (abs < 0x00800000u) return 1;   // other subnormals round up to 2^-126
  const uint32_t exponent = (abs >> 23) + ((abs & 0x7fffffu) != 0 ? 1u : 0u);  // biased
  return exponent > 254 ? kE8m0Nan : exponent;
}

// E8M0_VALUES[code] for code < 255: 2^(code - 127); code 0 is the float32 subnormal 2^-127.
inline float e8m0_value (uint32_t code) {
  return float_of(code == 0 ? 0x00400000u : code << 23);
}

// blockAmax then ue8m0BlockScale: the block's scale code. On the magnitudes' bits an integer
// max is the float max (a NaN's bits lie above +Inf's), so the loop needs no branch; the bits
// are below 2^31, so a signed max (one SSE2 compare) does.
inline uint32_t block_scale_code (const float* x, size_t block, const Format& f) {
  int32_t amax_bits = 0;
  for (size_t i = 0; i < block; i++) {
    const int32_t a = int32_t(bits_of(x[i]) & 0x7fffffffu);
    amax_bits = a > amax_bits ? a : amax_bits;
  }
  if (amax_bits > 0x7f800000) return kE8m0Nan;  // a NaN in the block
  const float amax = float_of(uint32_t(amax_bits));
  const float a = amax > f.amax_floor ? amax : f.amax_floor;
  return e8m0_ceil(a * f.inv_max);
}

// The value of f32ToE4m3 / f32ToE2m1 (saturating, ties to even) of a finite v, as a float32:
// roundToMinifloatCode (src/numerics/minifloat.ts) rounds |v| to a multiple of the step
// q = 2^(max(exponent of v, min_exp) - man_bits); so does one float add of M = 2^23 q, whose sum
// lies in [M, 2M) where the float32 spacing is q and the add rounds ties to even, and the
// subtraction of M is exact. Then min(., emax) is the saturation, and the sign is put back (a
// negative that rounds to 0 is -0, code 0x80 / 8). Checked against a verbatim port of
// roundToMinifloatCode for every non-negative finite float32, both formats. Exponents are capped
// at 2^16 (far above emax: such v saturate either way) so M stays finite. No branch: vectorizes.
inline float round_saturate (float v, const Format& f) {
  const uint32_t b = bits_of(v);
  const float y = float_of(b & 0x7fffffffu);
  const uint32_t lo = uint32_t(127 + f.min_exp), hi = 127 + 16;
  uint32_t e = (b & 0x7fffffffu) >> 23;
  e = e > lo ? e : lo;
  e = e < hi ? e : hi;
  const float m = float_of((e - f.man_bits + 23) << 23);
  float r = (y + m) - m;
  r = r < f.emax ? r : f.emax;
  return float_of(bits_of(r) | (b & 0x80000000u));
}

// Values a block is processed in: a local buffer, so the loop can vectorize even when out is x.
constexpr size_t kPiece = 64;

void round_trip_block (const float* x, size_t block, const Format& f, float* out) {
  const uint32_t scale_code = block_scale_code(x, block, f);
  if (scale_code == kE8m0Nan) {
    // The TypeScript composition multiplies a NaN scale: its bits are the canonical NaN, whatever the codes.
    const float nan = float_of(kCanonicalNan);
    for (size_t i = 0; i < block; i++) out[i] = nan;
    return;
  }
  // The quantiser's fround(x / s), the element cast, and the dequantiser's exact value * s.
  const float scale = e8m0_value(scale_code);
  float piece[kPiece];
  for (size_t at = 0; at < block; at += kPiece) {
    const size_t n = block - at < kPiece ? block - at : kPiece;
    for (size_t i = 0; i < n; i++) piece[i] = round_saturate(x[at + i] / scale, f) * scale;
    std::memcpy(out + at, piece, n * sizeof(float));
  }
}

}  // namespace

void mx_round_trip (const float* x, size_t length, size_t block, MxElement element, float* out, int threads) {
  const Format& f = element == MxElement::kE4m3 ? kE4m3 : kE2m1;
  parallel_ranges(length / block, 1, threads, [&](size_t b0, size_t b1) {
    for (size_t b = b0; b < b1; b++) round_trip_block(x + b * block, block, f, out + b * block);
  });
}

}  // namespace pdb
