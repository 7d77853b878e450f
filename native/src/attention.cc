#include <cstring>

#include "dot_tile.h"
#include "fmath.h"
#include "isa_kernels.h"
#include "parallel.h"

namespace pdb {
namespace PDB_ISA_NS {

namespace {

// Keys gathered into a contiguous block per pass of the score tiles.
constexpr size_t kKeyChunk = 64;

struct Query {
  const float* q;
  size_t heads, dim;
  const float* kv;
  const int32_t* keys;  // this query's keys
  size_t key_count;
};

// scores[hh * K + j] = dot(q head h0 + hh, kv[key_j]) for hh < hn, in the kernel order.
void score_dots (const Query& a, size_t h0, size_t hn, bool to_bf16, float* scores, Scratch& gathered) {
  const size_t K = a.key_count, D = a.dim;
  gathered.resize(kKeyChunk * D);
  for (size_t c0 = 0; c0 < K; c0 += kKeyChunk) {
    const size_t kc = K - c0 < kKeyChunk ? K - c0 : kKeyChunk;
    for (size_t j = 0; j < kc; j++) {
      std::memcpy(gathered.data() + j * D, a.kv + size_t(a.keys[c0 + j]) * D, D * sizeof(float));
    }
    dot_columns<WeightF32, DotOrder::kLanes8>(a.q + h0 * D, hn, D, gathered.data(), scores + c0, K, to_bf16, 0, kc);
  }
}

// One head's scores, in place: scale, max with the sink, exp, sum (sink last), divide.
void softmax_with_sink (float* s, size_t K, float sink, float scale, const AttentionOptions& o) {
  for (size_t j = 0; j < K; j++) s[j] = o.round_scores_bf16 ? round_bf16_nan_safe(s[j] * scale) : s[j] * scale;
  float m = sink;
  for (size_t j = 0; j < K; j++) if (s[j] > m) m = s[j];
  const F8 mv = f8_set1(m);
  size_t j = 0;
  for (; j + 8 <= K; j += 8) {
    F8 d = f8_load(s + j) - mv;
    if (o.round_scores_bf16) d = round_bf16_8(d);
    f8_store(s + j, exp8_f32(d));
  }
  for (; j < K; j++) {
    const float d = s[j] - m;
    s[j] = exp_f32(o.round_scores_bf16 ? round_bf16_nan_safe(d) : d);
  }
  const float ds = sink - m;
  const float e_sink = exp_f32(o.round_scores_bf16 ? round_bf16_nan_safe(ds) : ds);
  float sum = 0.0f;
  for (size_t i = 0; i < K; i++) sum = sum + s[i];
  sum = sum + e_sink;
  for (size_t i = 0; i < K; i++) {
    const float p = s[i] / sum;
    s[i] = o.round_probs_bf16 ? round_bf16_nan_safe(p) : p;
  }
}

inline F8 finish8 (F8 v, bool to_bf16) { return to_bf16 ? round_bf16_8(v) : canonical_nan8(v); }

// out[hh, d] = sum_j p[hh, j] kv[key_j][d], sequential in j, for heads hh and hh + 1 (when `two`),
// 32, then 8, then 1 channel at a time (each channel's chain is the same whatever the grouping).
void weighted_rows (const Query& a, const float* p, size_t hh, bool two, float* out, bool to_bf16) {
  const size_t K = a.key_count, D = a.dim;
  const float* p0 = p + hh * K;
  const float* p1 = two ? p0 + K : p0;
  float* o0 = out + hh * D;
  float* o1 = o0 + D;
  size_t d0 = 0;
  for (; d0 + 32 <= D; d0 += 32) {
    F8 a0[4], a1[4];
    for (int u = 0; u < 4; u++) a0[u] = a1[u] = f8_zero();
    for (size_t j = 0; j < K; j++) {
      const float* row = a.kv + size_t(a.keys[j]) * D + d0;
      const F8 w0 = f8_set1(p0[j]);
      const F8 w1 = f8_set1(p1[j]);
      for (int u = 0; u < 4; u++) {
        const F8 r = f8_load(row + 8 * u);
        a0[u] = a0[u] + w0 * r;
        a1[u] = a1[u] + w1 * r;
      }
    }
    for (int u = 0; u < 4; u++) {
      f8_store(o0 + d0 + 8 * u, finish8(a0[u], to_bf16));
      if (two) f8_store(o1 + d0 + 8 * u, finish8(a1[u], to_bf16));
    }
  }
  for (; d0 + 8 <= D; d0 += 8) {
    F8 a0 = f8_zero(), a1 = f8_zero();
    for (size_t j = 0; j < K; j++) {
      const F8 r = f8_load(a.kv + size_t(a.keys[j]) * D + d0);
      a0 = a0 + f8_set1(p0[j]) * r;
      a1 = a1 + f8_set1(p1[j]) * r;
    }
    f8_store(o0 + d0, finish8(a0, to_bf16));
    if (two) f8_store(o1 + d0, finish8(a1, to_bf16));
  }
  for (; d0 < D; d0++) {
    float s0 = 0.0f, s1 = 0.0f;
    for (size_t j = 0; j < K; j++) {
      const float v = a.kv[size_t(a.keys[j]) * D + d0];
      s0 = s0 + p0[j] * v;
      s1 = s1 + p1[j] * v;
    }
    o0[d0] = finish_output(s0, to_bf16);
    if (two) o1[d0] = finish_output(s1, to_bf16);
  }
}

}  // namespace

void attention_mqa (const float* q, size_t t_count, size_t heads, size_t dim, const float* kv, size_t n,
                    const int32_t* offsets, const int32_t* keys, const float* sinks, float scale,
                    AttentionOptions opts, float* out, int threads) {
  (void)n;
  if (t_count == 0 || heads == 0) return;
  // Few queries (decode): also split heads, so every thread has work.
  size_t split = 1;
  if (t_count < size_t(threads)) {
    split = (size_t(threads) + t_count - 1) / t_count;
    if (split > heads) split = heads;
  }
  const size_t per = (heads + split - 1) / split;
  split = (heads + per - 1) / per;
  // Round-robin over the tasks: a causal prefill's later queries have more keys.
  parallel_strided(t_count * split, threads, [&](size_t first, size_t stride) {
    Scratch scores, gathered;
    for (size_t task = first; task < t_count * split; task += stride) {
      const size_t t = task / split;
      const size_t h0 = (task % split) * per;
      const size_t hn = heads - h0 < per ? heads - h0 : per;
      const Query a{ q + t * heads * dim, heads, dim, kv, keys + offsets[t], size_t(offsets[t + 1] - offsets[t]) };
      scores.resize(hn * a.key_count);
      score_dots(a, h0, hn, opts.round_scores_bf16, scores.data(), gathered);
      for (size_t hh = 0; hh < hn; hh++) {
        softmax_with_sink(scores.data() + hh * a.key_count, a.key_count, sinks[h0 + hh], scale, opts);
      }
      float* o = out + (t * heads + h0) * dim;
      for (size_t hh = 0; hh < hn; hh += 2) weighted_rows(a, scores.data(), hh, hh + 1 < hn, o, opts.round_out_bf16);
    }
  });
}

}  // namespace PDB_ISA_NS
}  // namespace pdb
