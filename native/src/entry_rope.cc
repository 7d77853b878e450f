#include "args.h"
#include "entries.h"
#include "parallel.h"
#include "rope_rows.h"

namespace pdb {

// ropeRows (x, rows, heads, headDim, offset, ropeDim, cos, sin, tableRows, inverse)
Napi::Value RopeRowsEntry (const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  size_t rows = 0, heads = 0, head_dim = 0, offset = 0, rope_dim = 0;
  const auto x = typed_array<float>(info, 0, napi_float32_array, "x", "Float32Array");
  if (!x.ok || !size_arg(info, 1, "rows", &rows) || !size_arg(info, 2, "heads", &heads) ||
      !size_arg(info, 3, "headDim", &head_dim) || !size_arg(info, 4, "offset", &offset) ||
      !size_arg(info, 5, "ropeDim", &rope_dim)) return env.Undefined();
  const auto cos = typed_array<float>(info, 6, napi_float32_array, "cos", "Float32Array");
  if (!cos.ok) return env.Undefined();
  const auto sin = typed_array<float>(info, 7, napi_float32_array, "sin", "Float32Array");
  if (!sin.ok) return env.Undefined();
  const auto table_rows = typed_array<int32_t>(info, 8, napi_int32_array, "tableRows", "Int32Array");
  if (!table_rows.ok) return env.Undefined();
  const bool inverse = info.Length() > 9 && info[9].ToBoolean().Value();
  if (rope_dim < 2 || rope_dim % 2 != 0 || offset > head_dim || rope_dim > head_dim - offset) {
    Napi::RangeError::New(env, "ropeDim must be even and at least 2, and offset + ropeDim at most headDim")
      .ThrowAsJavaScriptException();
    return env.Undefined();
  }
  const size_t half = rope_dim / 2;
  if (!check_length(env, "x", x.length, mul3(rows, heads, head_dim), 1, "rows x heads x headDim") ||
      !check_length(env, "sin", sin.length, cos.length, 1, "the length of cos") ||
      !check_length(env, "tableRows", table_rows.length, rows, 1, "rows")) return env.Undefined();
  if (cos.length % half != 0) {
    Napi::RangeError::New(env, "cos and sin must hold whole table rows of ropeDim / 2").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  if (!check_indices(env, "tableRows", table_rows.data, table_rows.length, cos.length / half)) return env.Undefined();
  rope_rows(x.data, rows, heads, head_dim, offset, rope_dim, cos.data, sin.data, table_rows.data, inverse,
            threads_for(mul3(rows, heads, rope_dim)));
  return info[0];
}

}  // namespace pdb
