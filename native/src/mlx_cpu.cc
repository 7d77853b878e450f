// The mlx-cpu quantized matmuls (mlx_cpu.h): the thread split and the choice of ISA variant; the
// loops themselves are mlx_cpu_isa.cc, compiled once per ISA.
#include "mlx_cpu.h"

#include <cstring>
#include <initializer_list>
#include <utility>

#include "isa.h"
#include "mlx_cpu_isa.h"
#include "parallel.h"

namespace pdb {
namespace {

const MlxCpuIsaKernels* g_chosen = nullptr;

const MlxCpuIsaKernels* by_name (const char* name) {
#if defined(PDB_HAVE_AVX2)
  if (std::strcmp(name, "avx512") == 0 && avx512_usable()) return &avx512::kMlxCpuKernels;
  if (std::strcmp(name, "avx2") == 0 && avx2_usable()) return &avx2::kMlxCpuKernels;
#endif
  if (std::strcmp(name, "portable") == 0) return &portable::kMlxCpuKernels;
  return nullptr;
}

// The addon's ISA (PD_KERNELS_ISA or the widest this CPU runs) unless a test chose another.
const MlxCpuIsaKernels& chosen () {
  if (g_chosen == nullptr) g_chosen = by_name(kernels().name);
  if (g_chosen == nullptr) g_chosen = &portable::kMlxCpuKernels;
  return *g_chosen;
}

size_t units_of (size_t m, size_t n) {
  return ((m + kMlxUnitRows - 1) / kMlxUnitRows) * ((n + kMlxUnitColumns - 1) / kMlxUnitColumns);
}

// The rounding bits, with kMlxOperandsNanSafe added when the call has rows enough to pay for the
// scan and no operand holds a NaN that could carry (mlx_cpu_isa.h).
int with_nan_scan (const MlxCpuIsaKernels& isa, int rounding, size_t m, std::initializer_list<std::pair<const float*, size_t>> operands) {
  if (m < kMlxNanScanRows) return rounding;
  for (const auto& [p, count] : operands) {
    if (!isa.nan_safe(p, count)) return rounding;
  }
  return rounding | kMlxOperandsNanSafe;
}

}  // namespace

bool mlx_cpu_nan_safe (const float* p, size_t count) {
  return chosen().nan_safe(p, count);
}

const char* mlx_cpu_isa () {
  return chosen().name;
}

bool mlx_cpu_select_isa (const std::string& name, std::string* error) {
  const MlxCpuIsaKernels* k = by_name(name.c_str());
  if (k == nullptr) {
    *error = "mlx-cpu kernels: " + name + " is not an ISA this build and CPU run (expected avx512, avx2 or portable)";
    return false;
  }
  g_chosen = k;
  return true;
}

void mlx_mxfp8_matmul (const float* x, size_t m, size_t k, const float* wt, const float* st, size_t n, int rounding,
                       float* out, int threads) {
  const MlxCpuIsaKernels& isa = chosen();
  const int r = with_nan_scan(isa, rounding, m, {{x, m * k}, {wt, k * n}, {st, k / 32 * n}});
  const MlxMxArgs a{x, k, n, wt, st, r, out};
  const auto fn = isa.mxfp8_units;
  parallel_ranges(units_of(m, n), 1, threads, [&a, fn, m](size_t b, size_t e) { fn(a, m, b, e); });
}

void mlx_affine_matmul (const float* x, size_t m, size_t k, const float* wt, size_t n, int rounding, float* out,
                        int threads) {
  const MlxCpuIsaKernels& isa = chosen();
  const int r = with_nan_scan(isa, rounding, m, {{x, m * k}, {wt, k * n}});
  const MlxAffineArgs a{x, k, n, wt, r, out};
  const auto fn = isa.affine_units;
  parallel_ranges(units_of(m, n), 1, threads, [&a, fn, m](size_t b, size_t e) { fn(a, m, b, e); });
}

}  // namespace pdb
