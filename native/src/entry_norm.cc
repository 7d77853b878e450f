#include "args.h"
#include "entries.h"
#include "parallel.h"
#include "unweighted_norm.h"

namespace pdb {

// unweightedNormRows (x, rows, d, eps, bf16): x [rows, d] in place
Napi::Value UnweightedNormRowsEntry (const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  size_t rows = 0, d = 0;
  const auto x = typed_array<float>(info, 0, napi_float32_array, "x", "Float32Array");
  if (!x.ok || !size_arg(info, 1, "rows", &rows) || !size_arg(info, 2, "d", &d)) return env.Undefined();
  if (info.Length() <= 3 || !info[3].IsNumber()) {
    Napi::TypeError::New(env, "eps must be a number").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  const float eps = float(info[3].As<Napi::Number>().DoubleValue());
  bool bf16 = false;
  if (!bool_arg(info, 4, "bf16", &bf16)) return env.Undefined();
  if (d < 1) {
    Napi::RangeError::New(env, "d must be at least 1").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  if (!check_length(env, "x", x.length, rows, d, "rows x d")) return env.Undefined();
  unweighted_norm_rows(x.data, rows, d, eps, bf16, threads_for(x.length));
  return info[0];
}

}  // namespace pdb
