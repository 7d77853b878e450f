#include "args.h"
#include "entries.h"
#include "parallel.h"
#include "topk_rows.h"

namespace pdb {

// topkRows (scores, rows, stride, lengths, k, indices, counts)
Napi::Value TopkRowsEntry (const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  size_t rows = 0, stride = 0, k = 0;
  const auto scores = typed_array<float>(info, 0, napi_float32_array, "scores", "Float32Array");
  if (!scores.ok || !size_arg(info, 1, "rows", &rows) || !size_arg(info, 2, "stride", &stride)) return env.Undefined();
  const auto lengths = typed_array<int32_t>(info, 3, napi_int32_array, "lengths", "Int32Array");
  if (!lengths.ok || !size_arg(info, 4, "k", &k)) return env.Undefined();
  const auto indices = typed_array<int32_t>(info, 5, napi_int32_array, "indices", "Int32Array");
  const auto counts = typed_array<int32_t>(info, 6, napi_int32_array, "counts", "Int32Array");
  if (!indices.ok || !counts.ok) return env.Undefined();
  if (!check_length(env, "scores", scores.length, rows, stride, "rows x stride") ||
      !check_length(env, "lengths", lengths.length, rows, 1, "rows") ||
      !check_length(env, "indices", indices.length, rows, k, "rows x k") ||
      !check_length(env, "counts", counts.length, rows, 1, "rows")) return env.Undefined();
  if (stride > size_t(INT32_MAX)) {
    Napi::RangeError::New(env, "stride must fit an Int32Array index").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  for (size_t r = 0; r < rows; r++) {
    if (lengths.data[r] < 0 || size_t(lengths.data[r]) > stride) {
      Napi::RangeError::New(env, "lengths[" + std::to_string(r) + "] = " + std::to_string(lengths.data[r]) +
                            " is not within [0, stride = " + std::to_string(stride) + "]").ThrowAsJavaScriptException();
      return env.Undefined();
    }
  }
  topk_rows(scores.data, rows, stride, lengths.data, k, indices.data, counts.data, threads_for(scores.length));
  return info[5];
}

}  // namespace pdb
