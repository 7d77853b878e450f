#include "args.h"
#include "entries.h"
#include "fmath_array.h"
#include "parallel.h"

namespace pdb {

// fmathArray (code, x, out)
Napi::Value FmathArrayEntry (const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  size_t code = 0;
  if (!size_arg(info, 0, "code", &code)) return env.Undefined();
  if (code >= size_t(FmathFn::kCount)) {
    Napi::RangeError::New(env, "code must name an fmath function").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  const auto x = typed_array<float>(info, 1, napi_float32_array, "x", "Float32Array");
  if (!x.ok) return env.Undefined();
  const auto y = typed_array<float>(info, 2, napi_float32_array, "out", "Float32Array");
  if (!y.ok || !check_length(env, "out", y.length, 1, x.length, "1 x length of x")) return env.Undefined();
  fmath_array(FmathFn(code), x.data, x.length, y.data, threads_for(x.length * 16));
  return info[2];
}

}  // namespace pdb
