// Quantise -> dequantise of consecutive blocks of `block` values in an MX format: the load-time
// weight formats mxfp8 / mxfp4 (src/model/weights/formats.ts; the reference is
// src/kernels/mx-round-trip.ts, the composition of src/numerics' quantize and dequantize). Per block:
//   amax = max |x| (NaN when any element is NaN)             blockAmax
//   code = e8m0Ceil(float(max(amax, floor) * float(1/emax))) ue8m0BlockScale, 255 for NaN / Inf
//   out  = value(saturating minifloat code of x / s) * s    ties to even, s = 2^(code - 127)
// A block whose scale code is 255 is written as 0x7fc00000 throughout, the bits the TypeScript
// composition gives (its NaN scale times any code).
#pragma once

#include <cstddef>

namespace pdb {

// The element format: e4m3fn (emax 448, amax floor float(1e-4)) or e2m1 (emax 6, floor 6 * 2^-126).
enum class MxElement { kE4m3 = 0, kE2m1 = 1 };

// x and out [length], length a multiple of block (even for e2m1); out may be x. Threads split
// whole blocks, so the result cannot depend on the thread count.
void mx_round_trip (const float* x, size_t length, size_t block, MxElement element, float* out, int threads);

}  // namespace pdb
