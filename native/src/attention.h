// Multi-query attention with per-head sinks over one shared K = V table (DeepSeek-V4 attention core).
#pragma once

#include <cstddef>
#include <cstdint>

namespace pdb {

struct AttentionOptions {
  bool round_scores_bf16 = false;  // transformers' bf16 eager path: bf16 scores, bf16 (s - max)
  bool round_probs_bf16 = false;   // probabilities cast to bf16 before the value product
  bool round_out_bf16 = false;     // output rounded to bf16
};

// For query t (keys keys[offsets[t] .. offsets[t+1]), in that order) and head h, all float32:
//   s_j  = dot(q[t, h], kv[key_j]) in the kernel order, then s_j * scale
//          (round_scores_bf16: bf16(bf16(dot) * scale))
//   m    = sinks[h], then m = s_j wherever s_j > m, j in order
//   e_j  = exp_f32(s_j - m), e_sink = exp_f32(sinks[h] - m)   (round_scores_bf16: the differences in bf16)
//   sum  = ((+0 + e_0) + e_1) + ... + e_sink
//   p_j  = e_j / sum                                             (round_probs_bf16: bf16)
//   out[t, h, d] = ((+0 + p_0 kv[key_0][d]) + p_1 kv[key_1][d]) + ...   (round_out_bf16: bf16)
// NaN outputs are canonical. Threads split queries, or heads of one query; never a sum.
// The caller guarantees sizes and that every key index is below n.
void attention_mqa (const float* q, size_t t_count, size_t heads, size_t dim, const float* kv, size_t n,
                    const int32_t* offsets, const int32_t* keys, const float* sinks, float scale,
                    AttentionOptions opts, float* out, int threads);

}  // namespace pdb
