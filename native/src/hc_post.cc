#include "hc_post.h"

#include <vector>

#include "bf16_scalar.h"
#include "parallel.h"

namespace pdb {

void hc_post (const float* h, size_t n, const float* post, const float* comb, const float* sub,
              size_t hc, size_t hidden, bool bf16, float* out, int threads) {
  parallel_ranges(n, 1, threads, [&](size_t t0, size_t t1) {
    std::vector<float> p(hc), c(hc * hc), column(hc), placed(hidden);
    for (size_t t = t0; t < t1; t++) {
      for (size_t k = 0; k < hc; k++) p[k] = bf16 ? to_bf16(post[t * hc + k]) : post[t * hc + k];
      for (size_t i = 0; i < hc * hc; i++) c[i] = bf16 ? to_bf16(comb[t * hc * hc + i]) : comb[t * hc * hc + i];
      const float* ht = h + t * hc * hidden;
      const float* st = sub + t * hidden;
      for (size_t k = 0; k < hc; k++) {
        float* o = out + (t * hc + k) * hidden;
        for (size_t j = 0; j < hc; j++) column[j] = c[j * hc + k];
        const float pk = p[k];
        for (size_t d = 0; d < hidden; d++) {
          float acc = column[0] * ht[d];
          for (size_t j = 1; j < hc; j++) acc = acc + column[j] * ht[j * hidden + d];
          o[d] = acc;
          placed[d] = pk * st[d];
        }
        if (bf16) {
          for (size_t d = 0; d < hidden; d++) {
            o[d] = to_bf16(o[d]);
            placed[d] = to_bf16(placed[d]);
          }
        }
        for (size_t d = 0; d < hidden; d++) {
          const float v = placed[d] + o[d];
          o[d] = canonical(bf16 ? to_bf16(v) : v);
        }
      }
    }
  });
}

}  // namespace pdb
