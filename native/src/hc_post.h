// The hyper-connections' write-back (src/model/engine/hyper-connections.ts hcPost; its reference
// is src/kernels/hc-post.ts): for each token t and stream k,
//   new_k = act(act(post_k * sub) + act(sum_j comb[j][k] * h_j)), j ascending, every step in float32,
// post and comb first cast by act (bf16 RNE when bf16, else identity). NaN written canonical.
#pragma once

#include <cstddef>

namespace pdb {

// h [n, hc, hidden], post [n, hc], comb [n, hc, hc], sub [n, hidden] -> out [n, hc, hidden].
// Threads split (token, stream, block of hidden) units, so one token splits too; each element's
// operations are the reference's, in its order.
void hc_post (const float* h, size_t n, const float* post, const float* comb, const float* sub,
              size_t hc, size_t hidden, bool bf16, float* out, int threads);

}  // namespace pdb
