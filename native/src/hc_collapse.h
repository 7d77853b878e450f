// The hyper-connections' collapse (src/model/engine/hyper-connections.ts hcPre; its reference is
// src/kernels/hc-collapse.ts): for each token t, the sublayer input
//   out_t = act(sum_j pre_{t,j} * h_{t,j}), j ascending, every product and sum rounded to float32,
// act = bf16 round to nearest even when bf16, else identity. NaN written canonical.
#pragma once

#include <cstddef>

namespace pdb {

// h [n, hc, hidden], pre [n, hc] -> out [n, hidden]. Threads split (token, block of hidden) units,
// so one token splits too.
void hc_collapse (const float* h, size_t n, const float* pre, size_t hc, size_t hidden, bool bf16, float* out,
                  int threads);

}  // namespace pdb
