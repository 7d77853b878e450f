#include "args.h"
#include "attention.h"
#include "entries.h"
#include "indexer.h"
#include "parallel.h"

namespace pdb {

namespace {

size_t saturating_mul (size_t a, size_t b) {
  size_t p = 0;
  return __builtin_mul_overflow(a, b, &p) ? SIZE_MAX : p;
}

}  // namespace

// attentionMqa (q, T, H, D, kv, N, offsets, keyIndex, sinks, scale, flags, out)
// flags: 1 round scores to bf16, 2 round probabilities, 4 round the output.
Napi::Value AttentionMqaEntry (const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  size_t t = 0, h = 0, d = 0, n = 0, flags = 0;
  float scale = 0;
  const auto q = typed_array<float>(info, 0, napi_float32_array, "q", "Float32Array");
  if (!q.ok || !size_arg(info, 1, "T", &t) || !size_arg(info, 2, "H", &h) || !size_arg(info, 3, "D", &d)) return env.Undefined();
  const auto kv = typed_array<float>(info, 4, napi_float32_array, "kv", "Float32Array");
  if (!kv.ok || !size_arg(info, 5, "N", &n)) return env.Undefined();
  const auto offsets = typed_array<int32_t>(info, 6, napi_int32_array, "offsets", "Int32Array");
  if (!offsets.ok) return env.Undefined();
  const auto keys = typed_array<int32_t>(info, 7, napi_int32_array, "keyIndex", "Int32Array");
  if (!keys.ok) return env.Undefined();
  const auto sinks = typed_array<float>(info, 8, napi_float32_array, "sinks", "Float32Array");
  if (!sinks.ok || !float_arg(info, 9, "scale", &scale) || !size_arg(info, 10, "flags", &flags)) return env.Undefined();
  const auto out = typed_array<float>(info, 11, napi_float32_array, "out", "Float32Array");
  if (!out.ok) return env.Undefined();
  const size_t thd = mul3(t, h, d);
  if (!check_length(env, "q", q.length, thd, 1, "T x H x D") || !check_length(env, "kv", kv.length, n, d, "N x D") ||
      !check_length(env, "offsets", offsets.length, t + 1, 1, "T + 1") ||
      !check_length(env, "sinks", sinks.length, h, 1, "H") || !check_length(env, "out", out.length, thd, 1, "T x H x D")) {
    return env.Undefined();
  }
  if (offsets.data[0] != 0 || size_t(offsets.data[t]) != keys.length) {
    Napi::RangeError::New(env, "offsets must start at 0 and end at the length of keyIndex").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  for (size_t i = 0; i < t; i++) {
    if (offsets.data[i + 1] < offsets.data[i]) {
      Napi::RangeError::New(env, "offsets must be non-decreasing").ThrowAsJavaScriptException();
      return env.Undefined();
    }
  }
  if (!check_indices(env, "keyIndex", keys.data, keys.length, n)) return env.Undefined();
  AttentionOptions o;
  o.round_scores_bf16 = (flags & 1) != 0;
  o.round_probs_bf16 = (flags & 2) != 0;
  o.round_out_bf16 = (flags & 4) != 0;
  const size_t work = saturating_mul(saturating_mul(keys.length, h), saturating_mul(d, 2));
  attention_mqa(q.data, t, h, d, kv.data, n, offsets.data, keys.data, sinks.data, scale, o, out.data, threads_for(work));
  return info[11];
}

// indexerScores (q, T, Hi, Di, entries, N, weights, visible, qScale, wScale, out)
Napi::Value IndexerScoresEntry (const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  size_t t = 0, h = 0, d = 0, n = 0;
  float q_scale = 0, w_scale = 0;
  const auto q = typed_array<float>(info, 0, napi_float32_array, "q", "Float32Array");
  if (!q.ok || !size_arg(info, 1, "T", &t) || !size_arg(info, 2, "Hi", &h) || !size_arg(info, 3, "Di", &d)) return env.Undefined();
  const auto entries = typed_array<float>(info, 4, napi_float32_array, "entries", "Float32Array");
  if (!entries.ok || !size_arg(info, 5, "N", &n)) return env.Undefined();
  const auto weights = typed_array<float>(info, 6, napi_float32_array, "weights", "Float32Array");
  if (!weights.ok) return env.Undefined();
  const auto visible = typed_array<int32_t>(info, 7, napi_int32_array, "visible", "Int32Array");
  if (!visible.ok || !float_arg(info, 8, "qScale", &q_scale) || !float_arg(info, 9, "wScale", &w_scale)) return env.Undefined();
  const auto out = typed_array<float>(info, 10, napi_float32_array, "out", "Float32Array");
  if (!out.ok) return env.Undefined();
  if (!check_length(env, "q", q.length, mul3(t, h, d), 1, "T x Hi x Di") ||
      !check_length(env, "entries", entries.length, n, d, "N x Di") ||
      !check_length(env, "weights", weights.length, t, h, "T x Hi") ||
      !check_length(env, "visible", visible.length, t, 1, "T") ||
      !check_length(env, "out", out.length, t, n, "T x N") ||
      !check_indices(env, "visible", visible.data, visible.length, n + 1)) {
    return env.Undefined();
  }
  size_t work = 0;
  for (size_t i = 0; i < t; i++) work = work + size_t(visible.data[i]);
  indexer_scores(q.data, t, h, d, entries.data, n, weights.data, visible.data, q_scale, w_scale, out.data,
                 threads_for(saturating_mul(work, saturating_mul(h, d))));
  return info[10];
}

}  // namespace pdb
