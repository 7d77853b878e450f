#include "hc_post.h"

#include <vector>

#include "bf16_scalar.h"
#include "parallel.h"

namespace pdb {

namespace {

// Elements of one stream per unit of work: a decode step has one token, so its hc streams alone
// would leave most threads idle.
constexpr size_t kBlock = 512;

float cast (float v, bool bf16) { return bf16 ? to_bf16(v) : v; }

}  // namespace

void hc_post (const float* h, size_t n, const float* post, const float* comb, const float* sub,
              size_t hc, size_t hidden, bool bf16, float* out, int threads) {
  const size_t blocks = (hidden + kBlock - 1) / kBlock;
  // Units (t, k, block), t-major: each is whole output elements, computed as the reference does.
  parallel_ranges(n * hc * blocks, 1, threads, [&](size_t u0, size_t u1) {
    std::vector<float> column(hc), placed(kBlock);
    for (size_t u = u0; u < u1; u++) {
      const size_t t = u / (hc * blocks), k = u / blocks % hc, b = u % blocks;
      const size_t d0 = b * kBlock, d1 = hidden - d0 < kBlock ? hidden : d0 + kBlock;
      for (size_t j = 0; j < hc; j++) column[j] = cast(comb[(t * hc + j) * hc + k], bf16);
      const float pk = cast(post[t * hc + k], bf16);
      const float* ht = h + t * hc * hidden;
      const float* st = sub + t * hidden;
      float* o = out + (t * hc + k) * hidden;
      for (size_t d = d0; d < d1; d++) {
        float acc = column[0] * ht[d];
        for (size_t j = 1; j < hc; j++) acc = acc + column[j] * ht[j * hidden + d];
        o[d] = acc;
        placed[d - d0] = pk * st[d];
      }
      // The rounding passes apart from the sums, as the reference orders them (and they vectorize).
      float* pl = placed.data();
      if (bf16) {
        for (size_t d = d0; d < d1; d++) {
          o[d] = to_bf16(o[d]);
          pl[d - d0] = to_bf16(pl[d - d0]);
        }
      }
      for (size_t d = d0; d < d1; d++) {
        const float v = pl[d - d0] + o[d];
        o[d] = canonical(bf16 ? to_bf16(v) : v);
      }
    }
  });
}

}  // namespace pdb
