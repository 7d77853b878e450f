// RMSNorm over rows: y = x * r * w with r = 1 / sqrt(mean(x^2) + eps), all in float32.
#pragma once

#include <cstddef>

namespace pdb {

// Per row (docs/kernels.md, "RMSNorm"):
//   ss   = dot of the row with itself, in the kernel order (kernel_order.h)
//   mean = ss / float(d)
//   r    = 1 / sqrt(mean + eps)            correctly rounded sqrt and divide, no rsqrt
//   y_i  = (x_i * r) * w_i                 each op rounded; NaN outputs made canonical
// Rows are split between threads; a row is never split. The caller guarantees sizes and d >= 1.
void rms_norm (const float* x, size_t rows, size_t d, const float* weight, float eps, float* y,
               int threads);

}  // namespace pdb
