// moe_experts.h. The steps and their order are the reference's (src/kernels/moe-experts.ts); every
// value is the same float operation on the same operands, so the same bits:
//   gu = matmul(x rows, gate_up[e]); round; g = min(gate, limit) (a NaN stays); silu; round;
//   h = g * clamp(up, -limit, limit); round; y = matmul(h, down[e]); round; y *= weight; round;
//   routed[t] += y, experts in ascending id.
#include "moe_experts.h"

#include <cstring>
#include <vector>

#include "fmath_array.h"
#include "matmul_grouped.h"
#include "parallel.h"
#include "round_bf16.h"

namespace pdb {

namespace {

void round_all (const MoeExpertsArgs& a, float* v, size_t count) {
  if (a.round_bf16) round_bf16_array(v, count, threads_for(count));
}

}  // namespace

void moe_experts (const MoeExpertsArgs& a) {
  const size_t hidden = a.hidden, inter = a.inter, width = 2 * inter;
  // Per expert its rows (token, routing weight), ascending token then pick; experts with rows get
  // consecutive row blocks [first[e], first[e] + rows) of every buffer below.
  std::vector<size_t> count(a.experts, 0), first(a.experts + 1, 0);
  for (size_t i = 0; i < a.n * a.topk; i++) count[size_t(a.picks[i])]++;
  for (size_t e = 0; e < a.experts; e++) first[e + 1] = first[e] + count[e];
  const size_t rows = first[a.experts];
  std::vector<size_t> token(rows);
  std::vector<float> weight(rows);
  std::vector<size_t> next(first.begin(), first.end() - 1);
  for (size_t t = 0; t < a.n; t++) {
    for (size_t k = 0; k < a.topk; k++) {
      const size_t at = next[size_t(a.picks[t * a.topk + k])]++;
      token[at] = t;
      weight[at] = a.weights[t * a.topk + k];
    }
  }
  std::vector<float> xin(rows * hidden), gu(rows * width), h(rows * inter), y(rows * hidden);
  for (size_t r = 0; r < rows; r++) std::memcpy(&xin[r * hidden], a.x + token[r] * hidden, hidden * sizeof(float));

  // One projection of every expert on its rows: in [rows, k] -> out [rows, n], W per expert.
  std::vector<MatmulGroupBf16> groups(a.experts);
  const auto project = [&](const float* in, size_t k, const uint16_t* const* w, size_t n, float* out) {
    for (size_t e = 0; e < a.experts; e++) groups[e] = MatmulGroupBf16{in + first[e] * k, count[e], w[e], out + first[e] * n};
    matmul_bf16_grouped(groups.data(), a.experts, k, n, false, a.order, threads_for(rows * k * n));
  };
  project(xin.data(), hidden, a.gate_up, width, gu.data());
  round_all(a, gu.data(), gu.size());

  // The clamped SwiGLU, every row of every expert.
  const float lim = a.limit;
  for (size_t r = 0; r < rows; r++) {
    const float* gate = &gu[r * width];
    float* g = &h[r * inter];
    for (size_t i = 0; i < inter; i++) g[i] = gate[i] > lim ? lim : gate[i];
  }
  fmath_array(FmathFn::kSilu, h.data(), h.size(), h.data(), threads_for(h.size()));
  round_all(a, h.data(), h.size());
  for (size_t r = 0; r < rows; r++) {
    const float* up = &gu[r * width + inter];
    float* g = &h[r * inter];
    for (size_t i = 0; i < inter; i++) {
      float u = up[i];
      if (u > lim) u = lim;
      else if (u < -lim) u = -lim;
      g[i] = g[i] * u;
    }
  }
  round_all(a, h.data(), h.size());

  project(h.data(), inter, a.down, hidden, y.data());
  round_all(a, y.data(), y.size());
  for (size_t r = 0; r < rows; r++) {
    float* yr = &y[r * hidden];
    const float wr = weight[r];
    for (size_t c = 0; c < hidden; c++) yr[c] = yr[c] * wr;
  }
  round_all(a, y.data(), y.size());

  // The sum in ascending expert id: rows are laid out by expert, so in row order.
  std::memset(a.routed, 0, a.n * hidden * sizeof(float));
  for (size_t r = 0; r < rows; r++) {
    float* out = a.routed + token[r] * hidden;
    const float* yr = &y[r * hidden];
    for (size_t c = 0; c < hidden; c++) out[c] = out[c] + yr[c];
  }
}

}  // namespace pdb
