#include "args.h"
#include "entries.h"
#include "parallel.h"
#include "round_bf16.h"

namespace pdb {

// roundBf16Array (x): every element of x rounded to bf16 in place; returns x.
Napi::Value RoundBf16ArrayEntry (const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const auto x = typed_array<float>(info, 0, napi_float32_array, "x", "Float32Array");
  if (!x.ok) return env.Undefined();
  round_bf16_array(x.data, x.length, threads_for(x.length * 2));
  return info[0];
}

}  // namespace pdb
