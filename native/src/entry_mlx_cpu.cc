// The mlx-cpu cache math's native kernels (mlx_cpu.h): mlxMxfp8Matmul and mlxAffineMatmul,
// registered by RegisterMlxCpu so the shared addon.cc names them in one line.
#include "args.h"
#include "entries.h"
#include "mlx_cpu.h"
#include "parallel.h"

namespace pdb {
namespace {

bool rounding_arg (const Napi::CallbackInfo& info, size_t index, int max, int* out) {
  size_t v = 0;
  if (!size_arg(info, index, "rounding", &v)) return false;
  if (v > size_t(max)) {
    Napi::RangeError::New(info.Env(), "rounding must be a bit mask of the rounding points").ThrowAsJavaScriptException();
    return false;
  }
  *out = int(v);
  return true;
}

// mlxMxfp8Matmul (x, m, k, wt, st, n, rounding, out): x [m, k], wt [k, n] decoded e4m3 values,
// st [k/32, n] scales, out [m, n]; k a multiple of 32.
Napi::Value MlxMxfp8MatmulEntry (const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  size_t m = 0, k = 0, n = 0;
  int rounding = 0;
  const auto x = typed_array<float>(info, 0, napi_float32_array, "x", "Float32Array");
  if (!x.ok || !size_arg(info, 1, "m", &m) || !size_arg(info, 2, "k", &k)) return env.Undefined();
  const auto wt = typed_array<float>(info, 3, napi_float32_array, "wt", "Float32Array");
  if (!wt.ok) return env.Undefined();
  const auto st = typed_array<float>(info, 4, napi_float32_array, "st", "Float32Array");
  if (!st.ok || !size_arg(info, 5, "n", &n) || !rounding_arg(info, 6, 7, &rounding)) return env.Undefined();
  const auto out = typed_array<float>(info, 7, napi_float32_array, "out", "Float32Array");
  if (!out.ok) return env.Undefined();
  if (k % 32 != 0) {
    Napi::RangeError::New(env, "k must be a multiple of 32 (the mxfp8 group)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  if (!check_length(env, "x", x.length, m, k, "m x k") || !check_length(env, "wt", wt.length, k, n, "k x n") ||
      !check_length(env, "st", st.length, k / 32, n, "k/32 x n") || !check_length(env, "out", out.length, m, n, "m x n")) {
    return env.Undefined();
  }
  mlx_mxfp8_matmul(x.data, m, k, wt.data, st.data, n, rounding, out.data, threads_for(m * n * k));
  return info[7];
}

// mlxAffineMatmul (x, m, k, wt, n, rounding, out): x [m, k], wt [k, n] dequantized, out [m, n].
Napi::Value MlxAffineMatmulEntry (const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  size_t m = 0, k = 0, n = 0;
  int rounding = 0;
  const auto x = typed_array<float>(info, 0, napi_float32_array, "x", "Float32Array");
  if (!x.ok || !size_arg(info, 1, "m", &m) || !size_arg(info, 2, "k", &k)) return env.Undefined();
  const auto wt = typed_array<float>(info, 3, napi_float32_array, "wt", "Float32Array");
  if (!wt.ok || !size_arg(info, 4, "n", &n) || !rounding_arg(info, 5, 3, &rounding)) return env.Undefined();
  const auto out = typed_array<float>(info, 6, napi_float32_array, "out", "Float32Array");
  if (!out.ok) return env.Undefined();
  if (!check_length(env, "x", x.length, m, k, "m x k") || !check_length(env, "wt", wt.length, k, n, "k x n") ||
      !check_length(env, "out", out.length, m, n, "m x n")) {
    return env.Undefined();
  }
  mlx_affine_matmul(x.data, m, k, wt.data, n, rounding, out.data, threads_for(m * n * k));
  return info[6];
}

}  // namespace

void RegisterMlxCpu (Napi::Env env, Napi::Object exports) {
  exports.Set("mlxMxfp8Matmul", Napi::Function::New(env, MlxMxfp8MatmulEntry, "mlxMxfp8Matmul"));
  exports.Set("mlxAffineMatmul", Napi::Function::New(env, MlxAffineMatmulEntry, "mlxAffineMatmul"));
}

}  // namespace pdb
