// y[m, n] = x[m, k] · W[n, k]^T with W an nn.Linear weight (row-major [out, in]).
#pragma once

#include <cstddef>
#include <cstdint>

namespace pdb {

// Every y[i, j] is the dot product of x row i and W row j in the order of kernel_order.h
// (`blocks128`: each 128-long block in that order, block sums added in order; dot_tile.h), then
// finish_output (optional bf16 rounding, canonical NaN). Work is split between threads by output
// column ranges only. The caller guarantees the buffer sizes.
void matmul_f32 (const float* x, size_t m, size_t k, const float* w, size_t n, float* y,
                 bool round_bf16, bool blocks128, int threads);
void matmul_bf16 (const float* x, size_t m, size_t k, const uint16_t* w, size_t n, float* y,
                  bool round_bf16, bool blocks128, int threads);

}  // namespace pdb
