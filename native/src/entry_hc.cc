#include "args.h"
#include "entries.h"
#include "hc_collapse.h"
#include "hc_post.h"
#include "parallel.h"

namespace pdb {

// hcPost (h, n, post, comb, sub, hc, hidden, bf16, out)
Napi::Value HcPostEntry (const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  size_t n = 0, hc = 0, hidden = 0;
  const auto h = typed_array<float>(info, 0, napi_float32_array, "h", "Float32Array");
  if (!h.ok || !size_arg(info, 1, "n", &n)) return env.Undefined();
  const auto post = typed_array<float>(info, 2, napi_float32_array, "post", "Float32Array");
  const auto comb = typed_array<float>(info, 3, napi_float32_array, "comb", "Float32Array");
  const auto sub = typed_array<float>(info, 4, napi_float32_array, "sub", "Float32Array");
  if (!post.ok || !comb.ok || !sub.ok || !size_arg(info, 5, "hc", &hc) || !size_arg(info, 6, "hidden", &hidden)) return env.Undefined();
  bool bf16 = false;
  if (!bool_arg(info, 7, "bf16", &bf16)) return env.Undefined();
  const auto out = typed_array<float>(info, 8, napi_float32_array, "out", "Float32Array");
  if (!out.ok) return env.Undefined();
  if (hc < 1) {
    Napi::RangeError::New(env, "hc must be at least 1").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  const size_t streams = mul3(n, hc, hidden);
  if (!check_length(env, "h", h.length, streams, 1, "n x hc x hidden") ||
      !check_length(env, "out", out.length, streams, 1, "n x hc x hidden") ||
      !check_length(env, "post", post.length, n, hc, "n x hc") ||
      !check_length(env, "comb", comb.length, mul3(n, hc, hc), 1, "n x hc x hc") ||
      !check_length(env, "sub", sub.length, n, hidden, "n x hidden")) return env.Undefined();
  hc_post(h.data, n, post.data, comb.data, sub.data, hc, hidden, bf16, out.data, threads_for(streams == SIZE_MAX ? streams : streams * hc));
  return info[8];
}

// hcCollapse (h, n, pre, hc, hidden, bf16, out)
Napi::Value HcCollapseEntry (const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  size_t n = 0, hc = 0, hidden = 0;
  const auto h = typed_array<float>(info, 0, napi_float32_array, "h", "Float32Array");
  if (!h.ok || !size_arg(info, 1, "n", &n)) return env.Undefined();
  const auto pre = typed_array<float>(info, 2, napi_float32_array, "pre", "Float32Array");
  if (!pre.ok || !size_arg(info, 3, "hc", &hc) || !size_arg(info, 4, "hidden", &hidden)) return env.Undefined();
  bool bf16 = false;
  if (!bool_arg(info, 5, "bf16", &bf16)) return env.Undefined();
  const auto out = typed_array<float>(info, 6, napi_float32_array, "out", "Float32Array");
  if (!out.ok) return env.Undefined();
  if (hc < 1) {
    Napi::RangeError::New(env, "hc must be at least 1").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  const size_t streams = mul3(n, hc, hidden);
  if (!check_length(env, "h", h.length, streams, 1, "n x hc x hidden") ||
      !check_length(env, "pre", pre.length, n, hc, "n x hc") ||
      !check_length(env, "out", out.length, n, hidden, "n x hidden")) return env.Undefined();
  hc_collapse(h.data, n, pre.data, hc, hidden, bf16, out.data, threads_for(streams));
  return info[6];
}

}  // namespace pdb
