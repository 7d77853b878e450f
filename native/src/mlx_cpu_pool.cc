// mlx_pool (mlx_cpu_pool.h), step for step the TypeScript reference: every float32 op here is the
// reference's Math.fround(a op b), its fma32 is std::fma (both correctly rounded), and the one
// double op (floor(x + 0.5) in exp, a double literal) is done in double here too.
#include "mlx_cpu_pool.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "parallel.h"

namespace pdb {
namespace {

inline float bits_to_float (uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

inline float bf16_round (float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  const uint32_t r = (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
  return bits_to_float((b & 0x7fffffffu) > 0x7f800000u ? 0x7fc00000u : r);
}

inline float maybe_bf16 (int rounding, int bit, float v) {
  return (rounding & bit) != 0 ? bf16_round(v) : v;
}

// The constants as the reference forms them: the double literal, then rounded to float32.
const float kLog2e = float(1.442695);
const float kExpP0 = float(1.535336188319500e-4);
const float kExpPoly[6] = {float(1.339887440266574e-3), float(9.618437357674640e-3), float(5.550332471162809e-2),
                           float(2.402264791363012e-1), float(6.931472028550421e-1), float(1.0)};

struct PoolArgs {
  const float* kv;
  const float* gate;
  const float* ape;
  size_t ratio, dim;
  bool overlap;
  int rounding;
  float* out;
};

// Softmax over rows values in place (the reference's softmaxColumn).
void softmax (float* v, size_t rows) {
  float max = -std::numeric_limits<float>::infinity();
  for (size_t r = 0; r < rows; r++) if (v[r] > max) max = v[r];
  float sum = 0.0f;
  for (size_t r = 0; r < rows; r++) {
    v[r] = mlx_exp(v[r] - max);
    sum = sum + v[r];
  }
  for (size_t r = 0; r < rows; r++) v[r] = v[r] / sum;
}

void pool_output (const PoolArgs& a, size_t o) {
  const size_t w = o / a.dim, c = o % a.dim;
  const int q = a.rounding;
  float k[kMlxPoolMaxRows], g[kMlxPoolMaxRows];
  size_t rows = a.ratio;
  if (a.overlap) {
    const size_t width = 2 * a.dim;
    for (size_t r = 0; r < a.ratio; r++) {
      if (w == 0) {
        k[r] = 0.0f;
        g[r] = -std::numeric_limits<float>::infinity();
      } else {
        const size_t at = ((w - 1) * a.ratio + r) * width + c;
        k[r] = a.kv[at];
        g[r] = maybe_bf16(q, kMlxPoolRoundGate, a.gate[at] + a.ape[r * width + c]);
      }
      const size_t bt = (w * a.ratio + r) * width + a.dim + c;
      k[a.ratio + r] = a.kv[bt];
      g[a.ratio + r] = maybe_bf16(q, kMlxPoolRoundGate, a.gate[bt] + a.ape[r * width + a.dim + c]);
    }
    rows = 2 * a.ratio;
  } else {
    for (size_t r = 0; r < a.ratio; r++) {
      const size_t at = (w * a.ratio + r) * a.dim + c;
      k[r] = a.kv[at];
      g[r] = maybe_bf16(q, kMlxPoolRoundGate, a.gate[at] + a.ape[r * a.dim + c]);
    }
  }
  softmax(g, rows);
  float sum = 0.0f;
  for (size_t r = 0; r < rows; r++) {
    const float p = maybe_bf16(q, kMlxPoolRoundProduct, k[r] * maybe_bf16(q, kMlxPoolRoundWeights, g[r]));
    sum = maybe_bf16(q, kMlxPoolRoundSum, sum + p);
  }
  a.out[o] = sum != sum ? bits_to_float(0x7fc00000u) : sum;
}

}  // namespace

float mlx_exp (float x) {
  if (x != x) return x;
  if (x > 88.0f) return std::numeric_limits<float>::infinity();
  if (x < -88.0f) return 0.0f;
  const float y = x * kLog2e;
  const double ipart = std::floor(double(y) + 0.5);
  const float fpart = y - float(ipart);
  float p = kExpP0;
  for (float c : kExpPoly) p = std::fma(p, fpart, c);
  // 2^ipart from the exponent bits (ipart = -127 gives the pattern 0, i.e. 0.0).
  const float epart = bits_to_float(uint32_t(int32_t(ipart) + 127) << 23);
  return epart * p;
}

void mlx_pool (const float* kv, const float* gate, const float* ape, size_t windows, size_t ratio, size_t dim,
               bool overlap, int rounding, float* out, int threads) {
  const PoolArgs a{kv, gate, ape, ratio, dim, overlap, rounding, out};
  parallel_ranges(windows * dim, 1, threads, [&a](size_t b, size_t e) { for (size_t o = b; o < e; o++) pool_output(a, o); });
}

}  // namespace pdb
