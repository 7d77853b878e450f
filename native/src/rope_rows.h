// Interleaved RoPE over many rows and heads at once: the native twin of src/model/rope.ts
// applyRopeInterleaved.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pdb {

// x is [rows, heads, head_dim]; in each head, the pairs (2k, 2k+1) of the slice
// [offset, offset + rope_dim) are rotated by table row table_rows[r] (cos, sin [table, rope_dim/2]):
//   (a, b) -> (a c - b s, a s + b c), every product and sum rounded to float32; inverse uses -s.
// In place; NaN outputs canonical. Threads split rows. The caller guarantees sizes and table rows.
void rope_rows (float* x, size_t rows, size_t heads, size_t head_dim, size_t offset, size_t rope_dim,
                const float* cos, const float* sin, const int32_t* table_rows, bool inverse, int threads);

}  // namespace pdb
