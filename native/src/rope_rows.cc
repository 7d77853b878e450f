#include "isa_kernels.h"
#include "kernel_order.h"
#include "parallel.h"

namespace pdb {
namespace PDB_ISA_NS {

namespace {

// [v0, v1, v2, v3] -> [v0, v0, v1, v1, v2, v2, v3, v3]: one table entry per interleaved pair.
inline F8 pairs_of (const float* p) { return f8_load_pairs(p); }

void rotate (float* x, size_t half, const float* cos, const float* sin, bool inverse) {
  const F8 sign = f8_set1(inverse ? -0.0f : 0.0f);
  size_t k = 0;
  for (; k + 4 <= half; k += 4) {
    const F8 v = f8_load(x + 2 * k);                 // a0 b0 a1 b1 ...
    const F8 c = pairs_of(cos + k);
    const F8 s = f8_xor(pairs_of(sin + k), sign);
    const F8 ac = v * c;                             // a c, b c
    const F8 bs = f8_swap_pairs(v) * s;              // b s, a s
    f8_store(x + 2 * k, canonical_nan8(f8_addsub(ac, bs)));  // a c - b s, b c + a s
  }
  for (; k < half; k++) {
    const float c = cos[k];
    const float s = inverse ? -sin[k] : sin[k];
    const float a = x[2 * k], b = x[2 * k + 1];
    x[2 * k] = finish_output(a * c - b * s, false);
    x[2 * k + 1] = finish_output(a * s + b * c, false);
  }
}

}  // namespace

void rope_rows (float* x, size_t rows, size_t heads, size_t head_dim, size_t offset, size_t rope_dim,
                const float* cos, const float* sin, const int32_t* table_rows, bool inverse, int threads) {
  const size_t half = rope_dim / 2;
  parallel_ranges(rows, 1, threads, [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; r++) {
      const size_t tr = size_t(table_rows[r]) * half;
      for (size_t h = 0; h < heads; h++) rotate(x + (r * heads + h) * head_dim + offset, half, cos + tr, sin + tr, inverse);
    }
  });
}

}  // namespace PDB_ISA_NS
}  // namespace pdb
