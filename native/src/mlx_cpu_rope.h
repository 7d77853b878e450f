// mx.fast.rope (traditional) with MLX's CPU arithmetic for the mlx-cpu cache math: MLX's Cephes
// sin/cos (backend/cpu/simd/math.h) in float32 with std::fma. The TypeScript references are
// mlxRopeRow (src/numerics/mlx-cpu/rope.ts) and mlxSin/mlxCos (cephes.ts).
#pragma once

#include <cstddef>

namespace pdb {

// Rounding flags (a RoundingPoints entry's rope, bf16 = set): the cos/sin tables, each product, the results.
constexpr int kMlxRopeRoundTables = 1;
constexpr int kMlxRopeRoundProduct = 2;
constexpr int kMlxRopeRoundResult = 4;

// Past this |angle| MLX calls glibc's sinf/cosf, which is not ported.
constexpr float kMlxCephesLimit = 8388608.0f;

// MLX's simd::sin / simd::cos for |x| <= kMlxCephesLimit.
float mlx_sin (float x);
float mlx_cos (float x);

// Rows x [rows, d] rotated in place, row r at position first + r (pairs 2i, 2i+1 for i < n_inv).
// False, with nothing changed, when an angle passes kMlxCephesLimit.
bool mlx_rope_rows (float* x, size_t rows, size_t d, const float* inv, size_t n_inv, double first, int rounding,
                    int threads);

}  // namespace pdb
