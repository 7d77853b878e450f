// The mlx-cpu cache math's native kernels (mlx_cpu.h): mlxScanWeights, mlxMxfp8Matmul, mlxAffineMatmul,
// mlxPool, mlxRopeRows, mlxCpuLastPath and mlxCpuIsa,
// registered by RegisterMlxCpu so the shared addon.cc names them in one line.
#include "args.h"
#include "entries.h"
#include "mlx_cpu.h"
#include "mlx_cpu_pool.h"
#include "mlx_cpu_rope.h"
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

// A weight's scan (mlxScanWeights' Int32Array: nan_safe 0 or 1, the weights' and the scales' min
// exponents) at `index`, or a RangeError: a scan no scan could give is refused before any work.
bool weight_scan_arg (const Napi::CallbackInfo& info, size_t index, MlxWeightScan* out) {
  const auto v = typed_array<int32_t>(info, index, napi_int32_array, "scan", "Int32Array");
  if (!v.ok) return false;
  if (v.length != 3 || (v.data[0] != 0 && v.data[0] != 1)) {
    Napi::RangeError::New(info.Env(), "scan must be mlxScanWeights' 3 values (nan_safe 0 or 1, two exponents)").ThrowAsJavaScriptException();
    return false;
  }
  *out = {v.data[0] == 1, v.data[1], v.data[2]};
  if (!mlx_weight_scan_plausible(*out)) {
    Napi::RangeError::New(info.Env(), "scan holds an exponent no float32 has").ThrowAsJavaScriptException();
    return false;
  }
  return true;
}

// mlxScanWeights (wt, st?): a prepared weight's one scan (mlx_scan_weights, mlx_cpu.h) as an
// Int32Array [nan_safe (0 or 1), the weights' min exponent, the scales' (kMlxNoNonzero without st)].
Napi::Value MlxScanWeightsEntry (const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const auto wt = typed_array<float>(info, 0, napi_float32_array, "wt", "Float32Array");
  if (!wt.ok) return env.Undefined();
  MlxWeightScan ws{};
  if (info.Length() > 1 && !info[1].IsUndefined()) {
    const auto st = typed_array<float>(info, 1, napi_float32_array, "st", "Float32Array");
    if (!st.ok) return env.Undefined();
    ws = mlx_scan_weights(wt.data, wt.length, st.data, st.length);
  } else {
    ws = mlx_scan_weights(wt.data, wt.length, nullptr, 0);
  }
  Napi::Int32Array out = Napi::Int32Array::New(env, 3);
  out[0] = ws.nan_safe ? 1 : 0;
  out[1] = ws.weight_min_exponent;
  out[2] = ws.scale_min_exponent;
  return out;
}

// mlxMxfp8Matmul (x, m, k, wt, st, n, scan, rounding, out): x [m, k], wt [k, n] decoded e4m3 values (in column
// strips), st [k/32, n] scales, scan their mlxScanWeights, out [m, n]; k a multiple of 32.
Napi::Value MlxMxfp8MatmulEntry (const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  size_t m = 0, k = 0, n = 0;
  int rounding = 0;
  const auto x = typed_array<float>(info, 0, napi_float32_array, "x", "Float32Array");
  if (!x.ok || !size_arg(info, 1, "m", &m) || !size_arg(info, 2, "k", &k)) return env.Undefined();
  const auto wt = typed_array<float>(info, 3, napi_float32_array, "wt", "Float32Array");
  if (!wt.ok) return env.Undefined();
  const auto st = typed_array<float>(info, 4, napi_float32_array, "st", "Float32Array");
  MlxWeightScan ws{};
  if (!st.ok || !size_arg(info, 5, "n", &n) || !weight_scan_arg(info, 6, &ws) || !rounding_arg(info, 7, 7, &rounding)) {
    return env.Undefined();
  }
  const auto out = typed_array<float>(info, 8, napi_float32_array, "out", "Float32Array");
  if (!out.ok) return env.Undefined();
  if (k % 32 != 0) {
    Napi::RangeError::New(env, "k must be a multiple of 32 (the mxfp8 group)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  if (!check_length(env, "x", x.length, m, k, "m x k") || !check_length(env, "wt", wt.length, k, n, "k x n") ||
      !check_length(env, "st", st.length, k / 32, n, "k/32 x n") || !check_length(env, "out", out.length, m, n, "m x n")) {
    return env.Undefined();
  }
  mlx_mxfp8_matmul(x.data, m, k, wt.data, st.data, n, ws, rounding, out.data, threads_for(m * n * k));
  return info[8];
}

// mlxAffineMatmul (x, m, k, wt, n, scan, rounding, out): x [m, k], wt [k, n] dequantized (in column strips), scan
// its mlxScanWeights, out [m, n].
Napi::Value MlxAffineMatmulEntry (const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  size_t m = 0, k = 0, n = 0;
  int rounding = 0;
  const auto x = typed_array<float>(info, 0, napi_float32_array, "x", "Float32Array");
  if (!x.ok || !size_arg(info, 1, "m", &m) || !size_arg(info, 2, "k", &k)) return env.Undefined();
  const auto wt = typed_array<float>(info, 3, napi_float32_array, "wt", "Float32Array");
  MlxWeightScan ws{};
  if (!wt.ok || !size_arg(info, 4, "n", &n) || !weight_scan_arg(info, 5, &ws) || !rounding_arg(info, 6, 3, &rounding)) {
    return env.Undefined();
  }
  const auto out = typed_array<float>(info, 7, napi_float32_array, "out", "Float32Array");
  if (!out.ok) return env.Undefined();
  if (!check_length(env, "x", x.length, m, k, "m x k") || !check_length(env, "wt", wt.length, k, n, "k x n") ||
      !check_length(env, "out", out.length, m, n, "m x n")) {
    return env.Undefined();
  }
  mlx_affine_matmul(x.data, m, k, wt.data, n, ws, rounding, out.data, threads_for(m * n * k));
  return info[7];
}

// mlxPool (kv, gate, ape, windows, ratio, dim, overlap, rounding, out): the Compressor's pooling
// (mlx_cpu_pool.h). overlap: kv, gate [windows*ratio, 2*dim], ape [ratio, 2*dim]; else width dim.
Napi::Value MlxPoolEntry (const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  size_t windows = 0, ratio = 0, dim = 0;
  bool overlap = false;
  int rounding = 0;
  const auto kv = typed_array<float>(info, 0, napi_float32_array, "kv", "Float32Array");
  if (!kv.ok) return env.Undefined();
  const auto gate = typed_array<float>(info, 1, napi_float32_array, "gate", "Float32Array");
  if (!gate.ok) return env.Undefined();
  const auto ape = typed_array<float>(info, 2, napi_float32_array, "ape", "Float32Array");
  if (!ape.ok || !size_arg(info, 3, "windows", &windows) || !size_arg(info, 4, "ratio", &ratio) ||
      !size_arg(info, 5, "dim", &dim) || !bool_arg(info, 6, "overlap", &overlap) || !rounding_arg(info, 7, 15, &rounding)) {
    return env.Undefined();
  }
  const auto out = typed_array<float>(info, 8, napi_float32_array, "out", "Float32Array");
  if (!out.ok) return env.Undefined();
  if (ratio == 0 || (overlap ? 2 * ratio : ratio) > kMlxPoolMaxRows) {
    Napi::RangeError::New(env, "ratio must be 1 to " + std::to_string(kMlxPoolMaxRows) + " rows a window (half that with overlap)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  const size_t width = overlap ? 2 * dim : dim;
  size_t rows = 0;
  if (__builtin_mul_overflow(windows, ratio, &rows)) rows = SIZE_MAX;
  if (!check_length(env, "kv", kv.length, rows, width, "windows*ratio x width") ||
      !check_length(env, "gate", gate.length, rows, width, "windows*ratio x width") ||
      !check_length(env, "ape", ape.length, ratio, width, "ratio x width") ||
      !check_length(env, "out", out.length, windows, dim, "windows x dim")) {
    return env.Undefined();
  }
  mlx_pool(kv.data, gate.data, ape.data, windows, ratio, dim, overlap, rounding, out.data,
           threads_for(windows * dim * ratio * 64));
  return info[8];
}

// mlxRopeRows (x, rows, d, inv, first, rounding): rows of x [rows, d] rotated in place, row r at
// position first + r (mlx_cpu_rope.h). An angle past 2^23 (MLX hands those to glibc) is a RangeError.
Napi::Value MlxRopeRowsEntry (const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  size_t rows = 0, d = 0, first = 0;
  int rounding = 0;
  const auto x = typed_array<float>(info, 0, napi_float32_array, "x", "Float32Array");
  if (!x.ok || !size_arg(info, 1, "rows", &rows) || !size_arg(info, 2, "d", &d)) return env.Undefined();
  const auto inv = typed_array<float>(info, 3, napi_float32_array, "inv", "Float32Array");
  if (!inv.ok || !size_arg(info, 4, "first", &first) || !rounding_arg(info, 5, 7, &rounding)) return env.Undefined();
  if (!check_length(env, "x", x.length, rows, d, "rows x d")) return env.Undefined();
  if (2 * inv.length > d) {
    Napi::RangeError::New(env, "inv has " + std::to_string(inv.length) + " frequencies, more than d/2 = " + std::to_string(d / 2)).ThrowAsJavaScriptException();
    return env.Undefined();
  }
  if (!mlx_rope_rows(x.data, rows, d, inv.data, inv.length, double(first), rounding, threads_for(rows * inv.length * 64))) {
    Napi::RangeError::New(env, "mlx-cpu rope: an angle is NaN or past 2^23 (MLX hands those to glibc's sinf/cosf, not ported)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  return info[0];
}

// mlxCpuLastPath (): the path the last mlx-cpu matmul call took (mlx_cpu.h). Only for the tests.
Napi::Value MlxCpuLastPathEntry (const Napi::CallbackInfo& info) {
  return Napi::String::New(info.Env(), mlx_cpu_last_path());
}

// mlxCpuIsa (name?): the ISA variant the two matmuls run; with a name, choose it first (tests check
// every variant in one process). An unknown or unusable name is an Error and changes nothing.
Napi::Value MlxCpuIsaEntry (const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() > 0 && !info[0].IsUndefined()) {
    if (!info[0].IsString()) {
      Napi::TypeError::New(env, "mlxCpuIsa: the ISA must be a string").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    std::string error;
    if (!mlx_cpu_select_isa(info[0].As<Napi::String>().Utf8Value(), &error)) {
      Napi::Error::New(env, error).ThrowAsJavaScriptException();
      return env.Undefined();
    }
  }
  return Napi::String::New(env, mlx_cpu_isa());
}

}  // namespace

void RegisterMlxCpu (Napi::Env env, Napi::Object exports) {
  exports.Set("mlxScanWeights", Napi::Function::New(env, MlxScanWeightsEntry, "mlxScanWeights"));
  exports.Set("mlxMxfp8Matmul", Napi::Function::New(env, MlxMxfp8MatmulEntry, "mlxMxfp8Matmul"));
  exports.Set("mlxAffineMatmul", Napi::Function::New(env, MlxAffineMatmulEntry, "mlxAffineMatmul"));
  exports.Set("mlxPool", Napi::Function::New(env, MlxPoolEntry, "mlxPool"));
  exports.Set("mlxRopeRows", Napi::Function::New(env, MlxRopeRowsEntry, "mlxRopeRows"));
  exports.Set("mlxCpuLastPath", Napi::Function::New(env, MlxCpuLastPathEntry, "mlxCpuLastPath"));
  exports.Set("mlxCpuIsa", Napi::Function::New(env, MlxCpuIsaEntry, "mlxCpuIsa"));
}

}  // namespace pdb
