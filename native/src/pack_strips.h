// W packed ahead of time for the sequential-fma matmul (matmul_seq.h, MatmulOrder
// kSequentialFmaPacked). Only the addon's entry points use this header: it is plain data movement,
// compiled once, outside every ISA variant (simd8.h says why templates must not be shared).
#pragma once

#include <cstddef>

namespace pdb {

// Rows of W per packed strip (matmul_seq.h's kStrip): W packed is ceil(n / 16) strips of k x 16 codes.
constexpr size_t kPackedStrip = 16;

// W [n, k] row-major into strips: out[(s * k + i) * 16 + q] = w[(16 s + q) * k + i], zero past row n.
// Codes are moved, not converted (bf16 stays bf16). Plain data movement: no ISA variants.
template <class Code>
void pack_strips_whole (const Code* w, size_t n, size_t k, Code* out) {
  const size_t strips = (n + kPackedStrip - 1) / kPackedStrip;
  for (size_t s = 0; s < strips; s++) {
    for (size_t q = 0; q < kPackedStrip; q++) {
      const size_t row = s * kPackedStrip + q;
      Code* d = out + s * k * kPackedStrip + q;
      if (row < n) {
        const Code* src = w + row * k;
        for (size_t i = 0; i < k; i++) d[i * kPackedStrip] = src[i];
      }
      else {
        for (size_t i = 0; i < k; i++) d[i * kPackedStrip] = Code(0);
      }
    }
  }
}

// Every y[i, j] is the dot product of x row i and W row j in `order` (dot_tile.h, matmul_seq.h), then
// finish_output (optional bf16 rounding, canonical NaN). Work is split between threads by output
// column ranges only. The caller guarantees the buffer sizes.
void matmul_f32 (const float* x, size_t m, size_t k, const float* w, size_t n, float* y,
                 bool round_bf16, MatmulOrder order, int threads);
void matmul_bf16 (const float* x, size_t m, size_t k, const uint16_t* w, size_t n, float* y,
                  bool round_bf16, MatmulOrder order, int threads);

}  // namespace pdb
