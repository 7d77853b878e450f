#include "hc_collapse.h"

#include "bf16_scalar.h"
#include "parallel.h"

namespace pdb {

namespace {

// Elements of one token's output per unit of work: a decode step has one token.
constexpr size_t kBlock = 512;

}  // namespace

void hc_collapse (const float* h, size_t n, const float* pre, size_t hc, size_t hidden, bool bf16, float* out,
                  int threads) {
  const size_t blocks = (hidden + kBlock - 1) / kBlock;
  // Units (t, block), t-major: whole output elements, each summed over j ascending as the reference.
  parallel_ranges(n * blocks, 1, threads, [&](size_t u0, size_t u1) {
    for (size_t u = u0; u < u1; u++) {
      const size_t t = u / blocks, d0 = (u % blocks) * kBlock;
      const size_t d1 = hidden - d0 < kBlock ? hidden : d0 + kBlock;
      const float* ht = h + t * hc * hidden;
      const float* w = pre + t * hc;
      float* o = out + t * hidden;
      const float w0 = w[0];
      for (size_t d = d0; d < d1; d++) o[d] = w0 * ht[d];
      for (size_t j = 1; j < hc; j++) {
        const float wj = w[j];
        const float* src = ht + j * hidden;
        for (size_t d = d0; d < d1; d++) o[d] = o[d] + wj * src[d];
      }
      for (size_t d = d0; d < d1; d++) o[d] = canonical(bf16 ? to_bf16(o[d]) : o[d]);
    }
  });
}

}  // namespace pdb
