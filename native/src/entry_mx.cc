#include "args.h"
#include "entries.h"
#include "mx_round_trip.h"
#include "parallel.h"

namespace pdb {

// mxRoundTrip (x, block, element, out): element 0 e4m3, 1 e2m1; out [length of x], may be x.
Napi::Value MxRoundTripEntry (const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  size_t block = 0, element = 0;
  const auto x = typed_array<float>(info, 0, napi_float32_array, "x", "Float32Array");
  if (!x.ok || !size_arg(info, 1, "block", &block) || !size_arg(info, 2, "element", &element)) return env.Undefined();
  const auto out = typed_array<float>(info, 3, napi_float32_array, "out", "Float32Array");
  if (!out.ok) return env.Undefined();
  if (element > 1) {
    Napi::RangeError::New(env, "element must be 0 (e4m3) or 1 (e2m1)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  if (block < 1 || (element == 1 && block % 2 != 0)) {
    Napi::RangeError::New(env, "block must be at least 1, and even for e2m1").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  if (!check_length(env, "x", x.length, x.length / block, block, "blocks x block") ||
      !check_length(env, "out", out.length, x.length, 1, "length of x")) return env.Undefined();
  mx_round_trip(x.data, x.length, block, MxElement(int(element)), out.data, threads_for(x.length));
  return info[3];
}

}  // namespace pdb
