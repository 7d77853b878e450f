#include "args.h"
#include "bf16_arrays.h"
#include "entries.h"
#include "parallel.h"

namespace pdb {

// decodeBf16Array (codes, out): out [length of codes] float32.
Napi::Value DecodeBf16ArrayEntry (const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const auto codes = typed_array<uint16_t>(info, 0, napi_uint16_array, "codes", "Uint16Array");
  if (!codes.ok) return env.Undefined();
  const auto out = typed_array<float>(info, 1, napi_float32_array, "out", "Float32Array");
  if (!out.ok || !check_length(env, "out", out.length, codes.length, 1, "length of codes")) return env.Undefined();
  decode_bf16_array(codes.data, codes.length, out.data, threads_for(codes.length));
  return info[1];
}

// exactBf16Codes (values, out): true and out [length of values] filled, or false.
Napi::Value ExactBf16CodesEntry (const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const auto values = typed_array<float>(info, 0, napi_float32_array, "values", "Float32Array");
  if (!values.ok) return env.Undefined();
  const auto out = typed_array<uint16_t>(info, 1, napi_uint16_array, "out", "Uint16Array");
  if (!out.ok || !check_length(env, "out", out.length, values.length, 1, "length of values")) return env.Undefined();
  return Napi::Boolean::New(env, exact_bf16_codes(values.data, values.length, out.data, threads_for(values.length)));
}

}  // namespace pdb
