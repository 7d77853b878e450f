// The lightning indexer's scores (DeepSeek-V4 CSA layers).
#pragma once

#include <cstddef>
#include <cstdint>

namespace pdb {

// score[t, n] for n < visible[t], all float32:
//   wq_h = weights[t, h] * w_scale
//   acc  = +0; for h in order: acc = acc + wq_h * (relu(dot(q[t, h], entries[n])) * q_scale)
// with the dot in the kernel order and relu(x) = x <= 0 ? +0 : x (NaN passes); -Inf for
// n >= visible[t]. NaN outputs canonical. Threads split queries. The caller guarantees sizes and
// visible[t] <= n_entries.
void indexer_scores (const float* q, size_t t_count, size_t heads, size_t dim, const float* entries, size_t n_entries,
                     const float* weights, const int32_t* visible, float q_scale, float w_scale, float* out, int threads);

}  // namespace pdb
