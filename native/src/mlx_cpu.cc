#include "mlx_cpu.h"

#include <cstring>
#include <limits>

#include "parallel.h"

namespace pdb {
namespace {

// bf16(f32 v): round to nearest even on the upper 16 bits; a NaN becomes the positive quiet NaN,
// as the TypeScript reference's literal `NaN` does.
inline float bf16_round (float v) {
  if (v != v) return std::numeric_limits<float>::quiet_NaN();
  uint32_t b;
  std::memcpy(&b, &v, 4);
  b = (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&v, &b, 4);
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

// The e8m0 scale as MLX forms it: bf16 bits s << 7, i.e. 2^(s-127); s = 0 is 2^-127, 255 is +inf.
inline float mx_scale (uint8_t s) {
  const uint32_t bits = s == 0 ? 0x00400000u : uint32_t(s) << 23;
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

struct MxArgs {
  const float* x;
  size_t k, n;
  const uint8_t* codes;
  const uint8_t* scales;
  const float* e4m3;
  float* out;
};

template <bool P, bool S, bool C>
void mx_range (const MxArgs& a, size_t begin, size_t end) {
  const size_t groups = a.k / 32;
  for (size_t o = begin; o < end; o++) {
    const size_t r = o / a.n, j = o % a.n;
    const float* xr = a.x + r * a.k;
    const uint8_t* wr = a.codes + j * a.k;
    float sum = 0.0f;
    for (size_t g = 0; g < groups; g++) {
      float gsum = 0.0f;
      for (size_t i = g * 32; i < g * 32 + 32; i++) gsum = to<S>(gsum + to<P>(xr[i] * a.e4m3[wr[i]]));
      sum = to<S>(sum + to<C>(mx_scale(a.scales[j * groups + g]) * gsum));
    }
    a.out[o] = stored(sum);
  }
}

struct AffineArgs {
  const float* x;
  size_t k, n;
  const float* w;
  float* out;
};

template <bool P, bool S>
void affine_range (const AffineArgs& a, size_t begin, size_t end) {
  for (size_t o = begin; o < end; o++) {
    const size_t r = o / a.n, j = o % a.n;
    const float* xr = a.x + r * a.k;
    const float* wr = a.w + j * a.k;
    float sum = 0.0f;
    for (size_t i = 0; i < a.k; i++) sum = to<S>(sum + to<P>(xr[i] * wr[i]));
    a.out[o] = stored(sum);
  }
}

template <bool P, bool S, bool C>
void run_mx (const MxArgs& a, size_t count, int threads) {
  parallel_ranges(count, 1, threads, [&a](size_t b, size_t e) { mx_range<P, S, C>(a, b, e); });
}

template <bool P, bool S>
void run_affine (const AffineArgs& a, size_t count, int threads) {
  parallel_ranges(count, 1, threads, [&a](size_t b, size_t e) { affine_range<P, S>(a, b, e); });
}

}  // namespace

void mlx_mxfp8_matmul (const float* x, size_t m, size_t k, const uint8_t* codes, const uint8_t* scales, size_t n,
                       const float* e4m3, int rounding, float* out, int threads) {
  const MxArgs a{x, k, n, codes, scales, e4m3, out};
  const size_t count = m * n;
  switch (rounding & 7) {
    case 0: run_mx<false, false, false>(a, count, threads); break;
    case 1: run_mx<true, false, false>(a, count, threads); break;
    case 2: run_mx<false, true, false>(a, count, threads); break;
    case 3: run_mx<true, true, false>(a, count, threads); break;
    case 4: run_mx<false, false, true>(a, count, threads); break;
    case 5: run_mx<true, false, true>(a, count, threads); break;
    case 6: run_mx<false, true, true>(a, count, threads); break;
    default: run_mx<true, true, true>(a, count, threads); break;
  }
}

void mlx_affine_matmul (const float* x, size_t m, size_t k, const float* w, size_t n, int rounding, float* out,
                        int threads) {
  const AffineArgs a{x, k, n, w, out};
  const size_t count = m * n;
  switch (rounding & 3) {
    case 0: run_affine<false, false>(a, count, threads); break;
    case 1: run_affine<true, false>(a, count, threads); break;
    case 2: run_affine<false, true>(a, count, threads); break;
    default: run_affine<true, true>(a, count, threads); break;
  }
}

}  // namespace pdb
