// The Compressor's two pooling functions with MLX's CPU arithmetic (the mlx-cpu cache math; the
// TypeScript references are overlapCompress and simpleCompress in src/numerics/mlx-cpu/pooling.ts):
// per window and channel, gate (+ ape), a float32 softmax over the window's rows with MLX's Cephes
// exp, then the weighted rows summed sequentially. Outputs are independent, so threads split them.
#pragma once

#include <cstddef>

namespace pdb {

// Rounding flags (a RoundingPoints entry's pooling, bf16 = set): gate + ape (overlapGate for the
// overlap, simpleGate for the simple pooling), the softmax weights, each weight.kv product, the sum.
constexpr int kMlxPoolRoundGate = 1;
constexpr int kMlxPoolRoundWeights = 2;
constexpr int kMlxPoolRoundProduct = 4;
constexpr int kMlxPoolRoundSum = 8;

// The most rows one pooled output reads (2 * ratio for the overlap); the model's ratios are 4 and 128.
constexpr size_t kMlxPoolMaxRows = 512;

// MLX's simd::exp on a float32 (backend/cpu/simd/math.h): the Cephes polynomial with std::fma.
float mlx_exp (float x);

// overlap (ratio 4): kv, gate [windows*ratio, 2*dim], ape [ratio, 2*dim]; window w pools lane A
// (channels < dim) of window w-1 (zeros gated -inf for w = 0), then lane B of window w.
// simple: kv, gate [windows*ratio, dim], ape [ratio, dim]. out [windows, dim]; a NaN output is
// the positive quiet NaN.
void mlx_pool (const float* kv, const float* gate, const float* ape, size_t windows, size_t ratio, size_t dim,
               bool overlap, int rounding, float* out, int threads);

}  // namespace pdb
