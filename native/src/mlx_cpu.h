// MLX 0.32.2's CPU quantized matmuls as the mlx-cpu cache math needs them (docs/mlx-cpu-arithmetic.md):
// the bf16 kernels fp_qmm_t (mxfp8, group 32) and _qmm_t (affine) have no float accumulator; every
// product and every partial sum is rounded to the model dtype. Each output is one sequential chain
// in k order, so a thread computes whole outputs and the thread count cannot change a bit. The
// TypeScript references are src/numerics/mlx-cpu/quantized-matmul.ts (mxfp8Matmul, affineMatmul).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace pdb {

// Rounding flags (a RoundingPoints entry's quantizedMatmul, bf16 = set): product, sum, scaled.
constexpr int kMlxRoundProduct = 1;
constexpr int kMlxRoundSum = 2;
constexpr int kMlxRoundScaled = 4;

// The weights come prepared once (src/kernels/mlx-cpu.ts): float values, k-major within column
// strips of 64 (mlx_cpu_isa.h), so the loops over outputs read contiguous memory.
//
// What one scan of a prepared weight found (mlx_scan_weights), passed with every call so that a
// call scans only its x: whether the weights and scales hold no NaN that could carry
// (kMlxOperandsNanSafe, mlx_cpu_isa.h), and log2 lower bounds of their smallest nonzero
// magnitudes (MlxScan::min_exponent; kMlxNoNonzero for none, and for the affine weight's absent
// scales). The arrays must not change after the scan: a stale scan could choose a path whose
// roundings differ from the checked ones for what the arrays then hold.
struct MlxWeightScan {
  bool nan_safe;
  int weight_min_exponent;
  int scale_min_exponent;
};

// Scan wt[0, nw) and st[0, ns) (st null for the affine matmul) once, when the weight is prepared.
MlxWeightScan mlx_scan_weights (const float* wt, size_t nw, const float* st, size_t ns);
// Whether both exponents are ones a scan can give (-149 to 127, or kMlxNoNonzero): the addon
// refuses others before any work.
bool mlx_weight_scan_plausible (const MlxWeightScan& ws);

// out[m, n] = x[m, k] . w[n, k]^T, w mxfp8 given as wt [k, n] (the decoded e4m3 values) and
// st [k/32, n] (both in strips) (the e8m0 scales 2^(s-127)). Per output: per group of 32, gsum += x.w; then
// sum += scale . gsum.
void mlx_mxfp8_matmul (const float* x, size_t m, size_t k, const float* wt, const float* st, size_t n,
                       const MlxWeightScan& ws, int rounding, float* out, int threads);

// out[m, n] = x[m, k] . w[n, k]^T with w dequantized (bf16(bf16(scale.q) + bias)) and given
// as wt [k, n] in strips: one running sum over k.
void mlx_affine_matmul (const float* x, size_t m, size_t k, const float* wt, size_t n, const MlxWeightScan& ws,
                        int rounding, float* out, int threads);

// The path the last matmul call took (mlx_cpu_isa.h): "checked" (an operand holds a NaN that
// could carry), "unchecked" (kMlxOperandsNanSafe) or "avx512-bf16"
// (kMlxOperandsNormal). Every path gives the same bits; the tests use this to show which inputs
// take which.
const char* mlx_cpu_last_path ();

// The ISA variant the two matmuls run (mlx_cpu_isa.h): the addon's (isa.h) unless chosen here.
// Every variant gives the same bits; the choice exists so one process can check each of them.
const char* mlx_cpu_isa ();
// Choose "avx512", "avx2" or "portable"; false with `error` set (the choice unchanged) when this
// build or CPU cannot run it.
bool mlx_cpu_select_isa (const std::string& name, std::string* error);

}  // namespace pdb
