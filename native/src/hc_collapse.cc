#include "hc_collapse.h"

#include "bf16_scalar.h"
#include "parallel.h"

namespace pdb {

void hc_collapse (const float* h, size_t n, const float* pre, size_t hc, size_t hidden, bool bf16, float* out,
                  int threads) {
  parallel_ranges(n, 1, threads, [&](size_t t0, size_t t1) {
    for (size_t t = t0; t < t1; t++) {
      const float* ht = h + t * hc * hidden;
      const float* w = pre + t * hc;
      float* o = out + t * hidden;
      const float w0 = w[0];
      for (size_t d = 0; d < hidden; d++) o[d] = w0 * ht[d];
      for (size_t j = 1; j < hc; j++) {
        const float wj = w[j];
        const float* src = ht + j * hidden;
        for (size_t d = 0; d < hidden; d++) o[d] = o[d] + wj * src[d];
      }
      for (size_t d = 0; d < hidden; d++) o[d] = canonical(bf16 ? to_bf16(o[d]) : o[d]);
    }
  });
}

}  // namespace pdb
