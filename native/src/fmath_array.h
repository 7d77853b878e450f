// The element-wise functions of fmath.h over whole arrays.
#pragma once

#include <cstddef>

namespace pdb {

// Function codes, as src/kernels/fmath.ts FMATH_CODES names them.
enum class FmathFn { kExp = 0, kLog, kLog1p, kSigmoid, kSoftplus, kSilu, kSqrtsoftplus, kCount };

// y[i] = fn(x[i]) for i < n, each bit-identical to the scalar function; NaN written canonical.
// exp runs 8 lanes at a time (exp8_f32), the others element by element. Threads split the index
// range. x and y may be the same array (each element is read before it is written).
void fmath_array (FmathFn fn, const float* x, size_t n, float* y, int threads);

}  // namespace pdb
