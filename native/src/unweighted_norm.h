// DeepseekV4UnweightedRMSNorm over rows, in place (src/model/engine/norms.ts; its reference is
// src/kernels/unweighted-norm.ts). Per row of d:
//   ss = the row's dot with itself in the lanes8 order (src/kernels/order.ts dotInKernelOrder)
//   r  = act(1 / sqrt(ss / d + eps))      each op rounded to float32, correctly rounded sqrt
//   x  = act(x * r)                       NaN written canonical
// act = bf16 round to nearest even when bf16, else identity.
#pragma once

#include <cstddef>

namespace pdb {

// x [rows, d] in place. Threads split the rows; a row is never split.
void unweighted_norm_rows (float* x, size_t rows, size_t d, float eps, bool bf16, int threads);

}  // namespace pdb
