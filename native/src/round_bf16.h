// Rounding float32 activations to bf16 in place: the engine's rounding points (src/model/engine/activation.ts).
#pragma once

#include <cstddef>

namespace pdb {

// x[i] = bf16(x[i]) for i < n, kept as float32: round to nearest even on the bits; a NaN keeps its
// sign and becomes quiet (0x7fc00000 | sign), as src/numerics/bf16.ts f32ToBf16 does. Threads split the range.
void round_bf16_array (float* x, size_t n, int threads);

}  // namespace pdb
