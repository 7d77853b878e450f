// MLX 0.32.2's CPU quantized matmuls as the mlx-cpu cache math needs them (docs/mlx-cpu-arithmetic.md):
// the bf16 kernels fp_qmm_t (mxfp8, group 32) and _qmm_t (affine) have no float accumulator; every
// product and every partial sum is rounded to the model dtype. Each output is one sequential chain
// in k order, so a thread computes whole outputs and the thread count cannot change a bit. The
// TypeScript references are src/numerics/mlx-cpu/quantized-matmul.ts (mxfp8Matmul, affineMatmul).
#pragma once

#include <cstddef>
#include <cstdint>

namespace pdb {

// Rounding flags (a RoundingPoints entry's quantizedMatmul, bf16 = set): product, sum, scaled.
constexpr int kMlxRoundProduct = 1;
constexpr int kMlxRoundSum = 2;
constexpr int kMlxRoundScaled = 4;

// out[m, n] = x[m, k] . w[n, k]^T, w mxfp8: codes [n, k] (one e4m3 byte each, decoded through
// `e4m3` [256]), scales [n, k/32] e8m0 bytes. Per output: per group of 32, gsum += x.w; then
// sum += 2^(s-127) . gsum.
void mlx_mxfp8_matmul (const float* x, size_t m, size_t k, const uint8_t* codes, const uint8_t* scales, size_t n,
                       const float* e4m3, int rounding, float* out, int threads);

// out[m, n] = x[m, k] . w[n, k]^T with w already dequantized (bf16(bf16(scale.q) + bias)): one
// running sum over k.
void mlx_affine_matmul (const float* x, size_t m, size_t k, const float* w, size_t n, int rounding, float* out,
                        int threads);

}  // namespace pdb
