#include <cmath>

#include "isa_kernels.h"
#include "kernel_order.h"
#include "parallel.h"

namespace pdb {
namespace PDB_ISA_NS {

namespace {

void norm_row (const float* x, size_t d, const float* weight, float eps, float* y) {
  const float ss = dot_in_order<WeightF32>(x, x, d);
  const float mean = ss / float(d);
  const float r = 1.0f / std::sqrt(mean + eps);
  const F8 rv = f8_set1(r);
  const size_t d8 = d - d % 8;
  for (size_t i = 0; i < d8; i += 8) {
    const F8 scaled = f8_load(x + i) * rv;
    f8_store(y + i, canonical_nan8(scaled * f8_load(weight + i)));
  }
  for (size_t i = d8; i < d; i++) {
    const float scaled = x[i] * r;
    y[i] = finish_output(scaled * weight[i], false);
  }
}

}  // namespace

void rms_norm (const float* x, size_t rows, size_t d, const float* weight, float eps, float* y,
               int threads) {
  parallel_ranges(rows, 1, threads, [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; r++) norm_row(x + r * d, d, weight, eps, y + r * d);
  });
}

}  // namespace PDB_ISA_NS
}  // namespace pdb
