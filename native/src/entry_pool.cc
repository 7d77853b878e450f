#include "args.h"
#include "entries.h"
#include "parallel.h"
#include "pool.h"

namespace pdb {

// softmaxPool (kv, gate, W, rows, d, flags, out)
// flags: 1 round the weights to bf16, 2 round each product, 4 round the output.
Napi::Value SoftmaxPoolEntry (const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  size_t w = 0, rows = 0, d = 0, flags = 0;
  const auto kv = typed_array<float>(info, 0, napi_float32_array, "kv", "Float32Array");
  if (!kv.ok) return env.Undefined();
  const auto gate = typed_array<float>(info, 1, napi_float32_array, "gate", "Float32Array");
  if (!gate.ok || !size_arg(info, 2, "W", &w) || !size_arg(info, 3, "rows", &rows) || !size_arg(info, 4, "d", &d) ||
      !size_arg(info, 5, "flags", &flags)) return env.Undefined();
  const auto out = typed_array<float>(info, 6, napi_float32_array, "out", "Float32Array");
  if (!out.ok) return env.Undefined();
  if (rows < 1) {
    Napi::RangeError::New(env, "rows must be at least 1").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  const size_t total = mul3(w, rows, d);
  if (!check_length(env, "kv", kv.length, total, 1, "W x rows x d") ||
      !check_length(env, "gate", gate.length, total, 1, "W x rows x d") ||
      !check_length(env, "out", out.length, w, d, "W x d")) return env.Undefined();
  PoolOptions o;
  o.round_weights_bf16 = (flags & 1) != 0;
  o.round_products_bf16 = (flags & 2) != 0;
  o.round_out_bf16 = (flags & 4) != 0;
  softmax_pool(kv.data, gate.data, w, rows, d, o, out.data, threads_for(total == SIZE_MAX ? total : total * 16));
  return info[6];
}

}  // namespace pdb
