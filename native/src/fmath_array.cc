#include "fmath.h"
#include "isa_kernels.h"
#include "parallel.h"

namespace pdb {
namespace PDB_ISA_NS {

namespace {

template <float (*F)(float)>
void apply (const float* x, float* y, size_t i0, size_t i1) {
  for (size_t i = i0; i < i1; i++) y[i] = finish_output(F(x[i]), false);
}

void apply_exp (const float* x, float* y, size_t i0, size_t i1) {
  size_t i = i0;
  for (; i + 8 <= i1; i += 8) f8_store(y + i, exp8_f32(f8_load(x + i)));
  apply<exp_f32>(x, y, i, i1);
}

}  // namespace

void fmath_array (FmathFn fn, const float* x, size_t n, float* y, int threads) {
  parallel_ranges(n, 64, threads, [&](size_t i0, size_t i1) {
    switch (fn) {
      case FmathFn::kExp: apply_exp(x, y, i0, i1); break;
      case FmathFn::kLog: apply<log_f32>(x, y, i0, i1); break;
      case FmathFn::kLog1p: apply<log1p_f32>(x, y, i0, i1); break;
      case FmathFn::kSigmoid: apply<sigmoid_f32>(x, y, i0, i1); break;
      case FmathFn::kSoftplus: apply<softplus_f32>(x, y, i0, i1); break;
      case FmathFn::kSilu: apply<silu_f32>(x, y, i0, i1); break;
      case FmathFn::kSqrtsoftplus: apply<sqrtsoftplus_f32>(x, y, i0, i1); break;
      default: break;
    }
  });
}

}  // namespace PDB_ISA_NS
}  // namespace pdb
