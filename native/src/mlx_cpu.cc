// The mlx-cpu quantized matmuls (mlx_cpu.h): the thread split and the choice of ISA variant; the
// loops themselves are mlx_cpu_isa.cc, compiled once per ISA.
#include "mlx_cpu.h"

#include <atomic>
#include <cstring>

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

// Written by every call (a worker thread may make one too), read by the tests.
std::atomic<const char*> g_last_path{"none"};

bool cpu_runs_avx512_bf16 () {
#if defined(PDB_HAVE_AVX2)
  static const bool runs = avx512_usable() && __builtin_cpu_supports("avx512bf16");
  return runs;
#else
  return false;
#endif
}

// 2^a · 2^b as an exponent, where either may be kMlxNoNonzero (no nonzero finite value: every
// product with it is zero, infinite or NaN, none denormal).
int product_exponent (int a, int b) {
  return a == kMlxNoNonzero || b == kMlxNoNonzero ? kMlxNoNonzero : a + b;
}

// Whether no product, scaled group sum or partial sum can be denormal, every rounding point bf16,
// from the operands' smallest nonzero magnitudes 2^ex (x), 2^ew (weights), 2^es (mxfp8 scales).
// Every nonzero finite product is at least 2^e, e = ex + ew, and rounds to a bf16 value that is a
// multiple of 2^(e-7); so is every partial sum of them, exactly or rounded: nonzero, each is at
// least 2^(e-7), normal when e >= -119. A scaled group sum sc·gsum is then at least 2^(e-7+es)
// (normal when e + es >= -119) and rounds to a multiple of 2^(e+es-14), as do the running sums:
// normal when e + es >= -112. Infinities and NaNs are never denormal.
bool bf16_proof (int ex, int ew, const int* es) {
  const int e = product_exponent(ex, ew);
  if (e == kMlxNoNonzero) return true;
  if (e < -119) return false;
  return es == nullptr || *es == kMlxNoNonzero || e + *es >= -112;
}

// The rounding bits with the path's flags (mlx_cpu_isa.h): none when an operand holds a NaN that
// could carry; kMlxOperandsNanSafe otherwise; kMlxOperandsNormal too when every rounding point is
// bf16, the CPU runs AVX512_BF16, the ISA has those units and the magnitudes rule out denormals.
// The weights' side comes from their one scan (`ws`); only x, a small share of the call's work
// even at one row (k values against k * n multiply-adds), is scanned here. `scaled` is false for
// the affine matmul (no scales).
int path_flags (const MlxCpuIsaKernels& isa, int rounding, int all_points, const float* x, size_t nx,
                const MlxWeightScan& ws, bool scaled) {
  if (!ws.nan_safe) return rounding;
  const MlxScan sx = isa.scan(x, nx);
  if (!sx.nan_safe) return rounding;
  int r = rounding | kMlxOperandsNanSafe;
  if ((rounding & all_points) == all_points && isa.mxfp8_units_bf16 != nullptr && cpu_runs_avx512_bf16() &&
      bf16_proof(sx.min_exponent, ws.weight_min_exponent, scaled ? &ws.scale_min_exponent : nullptr)) {
    r |= kMlxOperandsNormal;
  }
  return r;
}

bool exponent_plausible (int e) {
  return e == kMlxNoNonzero || (e >= -149 && e <= 127);
}

const char* path_name (int flags) {
  if (flags & kMlxOperandsNormal) return "avx512-bf16";
  return (flags & kMlxOperandsNanSafe) ? "unchecked" : "checked";
}

}  // namespace

const char* mlx_cpu_last_path () {
  return g_last_path.load();
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

MlxWeightScan mlx_scan_weights (const float* wt, size_t nw, const float* st, size_t ns) {
  const MlxCpuIsaKernels& isa = chosen();
  const MlxScan sw = isa.scan(wt, nw);
  const MlxScan ss = st != nullptr ? isa.scan(st, ns) : MlxScan{true, kMlxNoNonzero};
  return {sw.nan_safe && ss.nan_safe, sw.min_exponent, ss.min_exponent};
}

bool mlx_weight_scan_plausible (const MlxWeightScan& ws) {
  return exponent_plausible(ws.weight_min_exponent) && exponent_plausible(ws.scale_min_exponent);
}

void mlx_mxfp8_matmul (const float* x, size_t m, size_t k, const float* wt, const float* st, size_t n,
                       const MlxWeightScan& ws, int rounding, float* out, int threads) {
  const MlxCpuIsaKernels& isa = chosen();
  const int r = path_flags(isa, rounding, kMlxRoundProduct | kMlxRoundSum | kMlxRoundScaled, x, m * k, ws, true);
  g_last_path = path_name(r);
  const MlxMxArgs a{x, k, n, wt, st, r, out};
  const auto fn = (r & kMlxOperandsNormal) ? isa.mxfp8_units_bf16 : isa.mxfp8_units;
  parallel_ranges(units_of(m, n), 1, threads, [&a, fn, m](size_t b, size_t e) { fn(a, m, b, e); });
}

void mlx_affine_matmul (const float* x, size_t m, size_t k, const float* wt, size_t n, const MlxWeightScan& ws,
                        int rounding, float* out, int threads) {
  const MlxCpuIsaKernels& isa = chosen();
  const int r = path_flags(isa, rounding, kMlxRoundProduct | kMlxRoundSum, x, m * k, ws, false);
  g_last_path = path_name(r);
  const MlxAffineArgs a{x, k, n, wt, r, out};
  const auto fn = (r & kMlxOperandsNormal) ? isa.affine_units_bf16 : isa.affine_units;
  parallel_ranges(units_of(m, n), 1, threads, [&a, fn, m](size_t b, size_t e) { fn(a, m, b, e); });
}

}  // namespace pdb
