// The compressor's softmax pooling: one output row per window, a softmax over the window's rows
// for every channel separately (DeepSeek-V4 CSA / HCA compressors and the indexer's compressor).
#pragma once

#include <cstddef>

namespace pdb {

struct PoolOptions {
  bool round_weights_bf16 = false;   // softmax weights cast to bf16 (transformers casts to the kv dtype)
  bool round_products_bf16 = false;  // p * kv rounded to bf16 (transformers' bf16 product tensor)
  bool round_out_bf16 = false;       // the pooled sum rounded to bf16
};

// For window w and channel c, rows r = 0 .. rows-1 of kv[w, r, c] and gate[w, r, c], all float32:
//   m   = gate[w, 0, c], then m = g_r wherever g_r > m, r in order   (-Inf rows get weight 0)
//   e_r = exp_f32(g_r - m); sum = ((+0 + e_0) + e_1) + ...
//   p_r = e_r / sum                                   (round_weights_bf16: bf16)
//   y   = ((+0 + p_0 kv_0) + p_1 kv_1) + ...          (round_products_bf16: each product bf16;
//                                                      round_out_bf16: y bf16)
// y[w, c]; NaN outputs canonical (a window whose gates are all -Inf gives NaN, as torch does).
// Threads split windows and channel blocks, never a sum. rows >= 1; the caller guarantees sizes.
void softmax_pool (const float* kv, const float* gate, size_t windows, size_t rows, size_t d, PoolOptions opts,
                   float* y, int threads);

}  // namespace pdb
