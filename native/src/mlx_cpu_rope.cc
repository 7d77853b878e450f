// mlx_rope_rows (mlx_cpu_rope.h), step for step the TypeScript reference: each float32 op is its
// Math.fround(a op b) and its fma32 is std::fma (both correctly rounded).
#include "mlx_cpu_rope.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "parallel.h"

namespace pdb {
namespace {

inline float bf16_round (float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  uint32_t r = (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
  if ((b & 0x7fffffffu) > 0x7f800000u) r = 0x7fc00000u;
  float f;
  std::memcpy(&f, &r, 4);
  return f;
}

inline float maybe_bf16 (int rounding, int bit, float v) {
  return (rounding & bit) != 0 ? bf16_round(v) : v;
}

// Cephes' constants as the reference forms them: the double literal rounded to float32.
const float kFourOverPi = float(1.27323954473516);
const float kDp1 = float(-0.78515625);
const float kDp2 = float(-2.4187564849853515625e-4);
const float kDp3 = float(-3.77489497744594108e-8);
const float kS1 = float(2.443315711809948e-5);
const float kS2 = float(-1.388731625493765e-3);
const float kS3 = float(4.166664568298827e-2);
const float kC1 = float(-1.9515295891e-4);
const float kC2 = float(8.3321608736e-3);
const float kC3 = float(-1.6666654611e-1);

float sincos (float x_in, bool sine) {
  bool sign_sin = x_in < 0;
  float x = std::fabs(x_in);
  const float y_scaled = x * kFourOverPi;
  const uint32_t emm2 = (uint32_t(y_scaled) + 1u) & ~1u;
  const float y = float(emm2);
  const bool poly_mask = (emm2 & 2u) != 0;
  x = std::fma(y, kDp1, x);
  x = std::fma(y, kDp2, x);
  x = std::fma(y, kDp3, x);
  sign_sin = sign_sin != ((emm2 & 4u) != 0);
  const bool sign_cos = ((emm2 - 2u) & 4u) != 0;
  const float z = x * x;
  float y1 = std::fma(z, kS1, kS2);
  float y2 = std::fma(z, kC1, kC2);
  y1 = std::fma(y1, z, kS3);
  y2 = std::fma(y2, z, kC3);
  y1 = y1 * z;
  y2 = y2 * z;
  y1 = y1 * z;
  y2 = std::fma(x, y2, x);
  y1 = std::fma(z, -0.5f, y1);
  y1 = y1 + 1.0f;
  if (sine) {
    const float ys = poly_mask ? y1 : y2;
    return sign_sin ? -ys : ys;
  }
  const float yc = poly_mask ? y2 : y1;
  return sign_cos ? yc : -yc;
}

struct RopeArgs {
  float* x;
  size_t d;
  const float* inv;
  size_t n_inv;
  double first;
  int rounding;
};

void rope_row (const RopeArgs& a, size_t r) {
  const int q = a.rounding;
  // positions = (arange(T) + offset) * 1.0 in float32.
  const float pos = float(a.first + double(r)) * 1.0f;
  float* row = a.x + r * a.d;
  for (size_t i = 0; i < a.n_inv; i++) {
    const float theta = pos * a.inv[i];
    const float c = maybe_bf16(q, kMlxRopeRoundTables, mlx_cos(theta));
    const float s = maybe_bf16(q, kMlxRopeRoundTables, mlx_sin(theta));
    const float x1 = row[2 * i], x2 = row[2 * i + 1];
    row[2 * i] = maybe_bf16(q, kMlxRopeRoundResult,
                            maybe_bf16(q, kMlxRopeRoundProduct, x1 * c) - maybe_bf16(q, kMlxRopeRoundProduct, x2 * s));
    row[2 * i + 1] = maybe_bf16(q, kMlxRopeRoundResult,
                                maybe_bf16(q, kMlxRopeRoundProduct, x1 * s) + maybe_bf16(q, kMlxRopeRoundProduct, x2 * c));
  }
}

}  // namespace

float mlx_sin (float x) { return sincos(x, true); }
float mlx_cos (float x) { return sincos(x, false); }

bool mlx_rope_rows (float* x, size_t rows, size_t d, const float* inv, size_t n_inv, double first, int rounding,
                    int threads) {
  // Every angle first, so an unported one changes nothing.
  for (size_t r = 0; r < rows; r++) {
    const float pos = float(first + double(r)) * 1.0f;
    for (size_t i = 0; i < n_inv; i++) {
      const float theta = pos * inv[i];
      if (!(std::fabs(theta) <= kMlxCephesLimit)) return false;
    }
  }
  const RopeArgs a{x, d, inv, n_inv, first, rounding};
  parallel_ranges(rows, 1, threads, [&a](size_t b, size_t e) { for (size_t r = b; r < e; r++) rope_row(a, r); });
  return true;
}

}  // namespace pdb
