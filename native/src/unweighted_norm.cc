#include "unweighted_norm.h"

#include <cmath>

#include "bf16_scalar.h"
#include "parallel.h"

namespace pdb {

namespace {

// dotInKernelOrder(x, x): 8 lane sums over the first d - d % 8 elements, the lane tree
// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), then the tail one by one.
float self_dot_lanes8 (const float* x, size_t d) {
  float l[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const size_t d8 = d - d % 8;
  for (size_t i = 0; i < d8; i += 8) {
    for (int j = 0; j < 8; j++) l[j] = l[j] + x[i + j] * x[i + j];
  }
  float s = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
  for (size_t i = d8; i < d; i++) s = s + x[i] * x[i];
  return s;
}

void norm_row (float* x, size_t d, float eps, bool bf16) {
  const float mean = self_dot_lanes8(x, d) / float(d);
  float r = 1.0f / std::sqrt(mean + eps);
  if (bf16) r = to_bf16(r);
  for (size_t i = 0; i < d; i++) {
    const float v = x[i] * r;
    x[i] = canonical(bf16 ? to_bf16(v) : v);
  }
}

}  // namespace

void unweighted_norm_rows (float* x, size_t rows, size_t d, float eps, bool bf16, int threads) {
  parallel_ranges(rows, 1, threads, [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; r++) norm_row(x + r * d, d, eps, bf16);
  });
}

}  // namespace pdb
