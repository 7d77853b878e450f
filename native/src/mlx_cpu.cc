#include "mlx_cpu.h"

#include <cstring>
#include <limits>

#include "parallel.h"

namespace pdb {
namespace {

// Written so that gcc -O3 vectorises the loops over outputs with the baseline ISA: the rounding is
// branch-free integer arithmetic, and each output's chain stays sequential in k (a lane is one
// output), so vectorising changes no bit.

// bf16(f32 v): round to nearest even on the upper 16 bits; a NaN becomes the positive quiet NaN,
// as the TypeScript reference's literal `NaN` does.
inline float bf16_round (float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  uint32_t r = (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
  r = (b & 0x7fffffffu) > 0x7f800000u ? 0x7fc00000u : r;
  std::memcpy(&v, &r, 4);
  return v;
}

// An output as the reference stores it: a NaN is the positive quiet NaN. (Which NaN an addition of
// two NaNs returns depends on operand order, which neither gcc nor V8's JIT promises to keep.)
inline float stored (float v) {
  return v != v ? std::numeric_limits<float>::quiet_NaN() : v;
}

template <bool B>
inline float to (float v) {
  return B ? bf16_round(v) : v;
}

// Outputs are computed in blocks of this many columns (one accumulator array on the stack).
constexpr size_t kBlock = 64;

struct MxArgs {
  const float* x;
  size_t k, n;
  const float* wt;  // [k, n] decoded e4m3 values, k-major
  const float* st;  // [k/32, n] scales
  float* out;
};

template <bool P, bool S, bool C>
void mx_unit (const MxArgs& a, size_t unit) {
  const size_t blocks = (a.n + kBlock - 1) / kBlock;
  const size_t r = unit / blocks, j0 = (unit % blocks) * kBlock;
  const size_t jn = a.n - j0 < kBlock ? a.n - j0 : kBlock;
  const float* xr = a.x + r * a.k;
  float sum[kBlock], gsum[kBlock];
  for (size_t j = 0; j < jn; j++) sum[j] = 0.0f;
  for (size_t g = 0; g < a.k / 32; g++) {
    for (size_t j = 0; j < jn; j++) gsum[j] = 0.0f;
    for (size_t i = g * 32; i < g * 32 + 32; i++) {
      const float xi = xr[i];
      const float* w = a.wt + i * a.n + j0;
      for (size_t j = 0; j < jn; j++) gsum[j] = to<S>(gsum[j] + to<P>(xi * w[j]));
    }
    const float* sc = a.st + g * a.n + j0;
    for (size_t j = 0; j < jn; j++) sum[j] = to<S>(sum[j] + to<C>(sc[j] * gsum[j]));
  }
  float* o = a.out + r * a.n + j0;
  for (size_t j = 0; j < jn; j++) o[j] = stored(sum[j]);
}

struct AffineArgs {
  const float* x;
  size_t k, n;
  const float* wt;  // [k, n] dequantized, k-major
  float* out;
};

template <bool P, bool S>
void affine_unit (const AffineArgs& a, size_t unit) {
  const size_t blocks = (a.n + kBlock - 1) / kBlock;
  const size_t r = unit / blocks, j0 = (unit % blocks) * kBlock;
  const size_t jn = a.n - j0 < kBlock ? a.n - j0 : kBlock;
  const float* xr = a.x + r * a.k;
  float sum[kBlock];
  for (size_t j = 0; j < jn; j++) sum[j] = 0.0f;
  for (size_t i = 0; i < a.k; i++) {
    const float xi = xr[i];
    const float* w = a.wt + i * a.n + j0;
    for (size_t j = 0; j < jn; j++) sum[j] = to<S>(sum[j] + to<P>(xi * w[j]));
  }
  float* o = a.out + r * a.n + j0;
  for (size_t j = 0; j < jn; j++) o[j] = stored(sum[j]);
}

template <bool P, bool S, bool C>
void run_mx (const MxArgs& a, size_t units, int threads) {
  parallel_ranges(units, 1, threads, [&a](size_t b, size_t e) { for (size_t u = b; u < e; u++) mx_unit<P, S, C>(a, u); });
}

template <bool P, bool S>
void run_affine (const AffineArgs& a, size_t units, int threads) {
  parallel_ranges(units, 1, threads, [&a](size_t b, size_t e) { for (size_t u = b; u < e; u++) affine_unit<P, S>(a, u); });
}

size_t units_of (size_t m, size_t n) {
  return m * ((n + kBlock - 1) / kBlock);
}

}  // namespace

void mlx_mxfp8_matmul (const float* x, size_t m, size_t k, const float* wt, const float* st, size_t n, int rounding,
                       float* out, int threads) {
  const MxArgs a{x, k, n, wt, st, out};
  const size_t units = units_of(m, n);
  switch (rounding & 7) {
    case 0: run_mx<false, false, false>(a, units, threads); break;
    case 1: run_mx<true, false, false>(a, units, threads); break;
    case 2: run_mx<false, true, false>(a, units, threads); break;
    case 3: run_mx<true, true, false>(a, units, threads); break;
    case 4: run_mx<false, false, true>(a, units, threads); break;
    case 5: run_mx<true, false, true>(a, units, threads); break;
    case 6: run_mx<false, true, true>(a, units, threads); break;
    default: run_mx<true, true, true>(a, units, threads); break;
  }
}

void mlx_affine_matmul (const float* x, size_t m, size_t k, const float* wt, size_t n, int rounding, float* out,
                        int threads) {
  const AffineArgs a{x, k, n, wt, out};
  const size_t units = units_of(m, n);
  switch (rounding & 3) {
    case 0: run_affine<false, false>(a, units, threads); break;
    case 1: run_affine<true, false>(a, units, threads); break;
    case 2: run_affine<false, true>(a, units, threads); break;
    default: run_affine<true, true>(a, units, threads); break;
  }
}

}  // namespace pdb
