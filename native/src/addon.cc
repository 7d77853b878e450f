// Entry point of the pdb_kernels addon: argument checks, then the kernels. Each JavaScript
// function here is wrapped by src/kernels/ (typed API, NumericsError on bad input).
#include <napi.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "args.h"
#include "entries.h"
#include "isa.h"
#include "matmul.h"
#include "pack_strips.h"
#include "parallel.h"
#include "peak.h"
#include "rmsnorm.h"

namespace {

using pdb::View;

size_t saturating_mul (size_t a, size_t b) {
  size_t p = 0;
  return __builtin_mul_overflow(a, b, &p) ? SIZE_MAX : p;
}

// matmulF32 / matmulBf16 (x, m, k, w, n, out, roundBf16, order): order is a MatmulOrder code
// (matmul.h); with 4 (sequential-fma, packed) w is W in strips of 16 rows (packStrips*).
template <class Code>
Napi::Value matmul_entry (const Napi::CallbackInfo& info, napi_typedarray_type w_type, const char* w_type_name,
                          void (*kernel)(const float*, size_t, size_t, const Code*, size_t, float*, bool, pdb::MatmulOrder, int)) {
  Napi::Env env = info.Env();
  size_t m = 0, k = 0, n = 0;
  const auto x = pdb::typed_array<float>(info, 0, napi_float32_array, "x", "Float32Array");
  if (!x.ok || !pdb::size_arg(info, 1, "m", &m) || !pdb::size_arg(info, 2, "k", &k)) return env.Undefined();
  const auto w = pdb::typed_array<Code>(info, 3, w_type, "w", w_type_name);
  if (!w.ok || !pdb::size_arg(info, 4, "n", &n)) return env.Undefined();
  const auto y = pdb::typed_array<float>(info, 5, napi_float32_array, "out", "Float32Array");
  if (!y.ok) return env.Undefined();
  const bool round_bf16 = info.Length() > 6 && info[6].ToBoolean().Value();
  size_t code = 0;
  if (info.Length() > 7 && !pdb::size_arg(info, 7, "order", &code)) return env.Undefined();
  if (code > size_t(pdb::MatmulOrder::kSequentialFmaPacked)) {
    Napi::RangeError::New(env, "order must be a matmul order code (0 lanes8, 1 blocks128, 2 lanes8-fma, 3 sequential-fma, 4 sequential-fma packed)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  const bool packed = code == size_t(pdb::MatmulOrder::kSequentialFmaPacked);
  // Packed W holds ceil(n / 16) whole strips: n rounded up to 16, times k.
  const size_t w_rows = packed ? (n > SIZE_MAX - 15 ? SIZE_MAX : (n + 15) / 16 * 16) : n;
  if (!pdb::check_length(env, "x", x.length, m, k, "m x k") ||
      !pdb::check_length(env, "w", w.length, w_rows, k, packed ? "ceil(n / 16) * 16 x k (packed)" : "n x k") ||
      !pdb::check_length(env, "out", y.length, m, n, "m x n")) return env.Undefined();
  const size_t work = saturating_mul(saturating_mul(m, n), k);
  kernel(x.data, m, k, w.data, n, y.data, round_bf16, pdb::MatmulOrder(int(code)), pdb::threads_for(work));
  return info[5];
}

Napi::Value MatmulF32 (const Napi::CallbackInfo& info) {
  return matmul_entry<float>(info, napi_float32_array, "Float32Array", pdb::matmul_f32);
}

Napi::Value MatmulBf16 (const Napi::CallbackInfo& info) {
  return matmul_entry<uint16_t>(info, napi_uint16_array, "Uint16Array", pdb::matmul_bf16);
}

// packStripsF32 / packStripsBf16 (w, n, k, out): W [n, k] into strips of 16 rows for order 4.
template <class Code>
Napi::Value pack_entry (const Napi::CallbackInfo& info, napi_typedarray_type type, const char* type_name) {
  Napi::Env env = info.Env();
  size_t n = 0, k = 0;
  const auto w = pdb::typed_array<Code>(info, 0, type, "w", type_name);
  if (!w.ok || !pdb::size_arg(info, 1, "n", &n) || !pdb::size_arg(info, 2, "k", &k)) return env.Undefined();
  const auto out = pdb::typed_array<Code>(info, 3, type, "out", type_name);
  if (!out.ok) return env.Undefined();
  const size_t rows = n > SIZE_MAX - 15 ? SIZE_MAX : (n + 15) / 16 * 16;
  if (!pdb::check_length(env, "w", w.length, n, k, "n x k") ||
      !pdb::check_length(env, "out", out.length, rows, k, "ceil(n / 16) * 16 x k")) return env.Undefined();
  pdb::pack_strips_whole(w.data, n, k, out.data);
  return info[3];
}

Napi::Value PackStripsF32 (const Napi::CallbackInfo& info) { return pack_entry<float>(info, napi_float32_array, "Float32Array"); }
Napi::Value PackStripsBf16 (const Napi::CallbackInfo& info) { return pack_entry<uint16_t>(info, napi_uint16_array, "Uint16Array"); }

// rmsNorm (x, rows, d, weight, eps, out)
Napi::Value RmsNorm (const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  size_t rows = 0, d = 0;
  const auto x = pdb::typed_array<float>(info, 0, napi_float32_array, "x", "Float32Array");
  if (!x.ok || !pdb::size_arg(info, 1, "rows", &rows) || !pdb::size_arg(info, 2, "d", &d)) return env.Undefined();
  const auto weight = pdb::typed_array<float>(info, 3, napi_float32_array, "weight", "Float32Array");
  if (!weight.ok) return env.Undefined();
  if (info.Length() <= 4 || !info[4].IsNumber()) {
    Napi::TypeError::New(env, "eps must be a number").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  const float eps = float(info[4].As<Napi::Number>().DoubleValue());
  const auto y = pdb::typed_array<float>(info, 5, napi_float32_array, "out", "Float32Array");
  if (!y.ok) return env.Undefined();
  if (d == 0) {
    Napi::RangeError::New(env, "d must be at least 1").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  if (!pdb::check_length(env, "x", x.length, rows, d, "rows x d") ||
      !pdb::check_length(env, "weight", weight.length, 1, d, "1 x d") ||
      !pdb::check_length(env, "out", y.length, rows, d, "rows x d")) return env.Undefined();
  pdb::rms_norm(x.data, rows, d, weight.data, eps, y.data, pdb::threads_for(saturating_mul(rows, d)));
  return info[5];
}

// setThreads (n): the thread count every later call may use (at least 1).
Napi::Value SetThreads (const Napi::CallbackInfo& info) {
  size_t n = 0;
  if (!pdb::size_arg(info, 0, "threads", &n)) return info.Env().Undefined();
  if (n < 1 || n > 1024) {
    Napi::RangeError::New(info.Env(), "threads must be between 1 and 1024").ThrowAsJavaScriptException();
    return info.Env().Undefined();
  }
  pdb::set_kernel_threads(int(n));
  return info.Env().Undefined();
}

Napi::Value GetThreads (const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), pdb::kernel_threads());
}

// measurePeakGflops (threads, millis)
Napi::Value MeasurePeakGflops (const Napi::CallbackInfo& info) {
  size_t threads = 0, millis = 0;
  if (!pdb::size_arg(info, 0, "threads", &threads) || !pdb::size_arg(info, 1, "millis", &millis)) {
    return info.Env().Undefined();
  }
  if (threads < 1 || threads > 1024 || millis < 1 || millis > 60000) {
    Napi::RangeError::New(info.Env(), "threads must be 1..1024 and millis 1..60000").ThrowAsJavaScriptException();
    return info.Env().Undefined();
  }
  return Napi::Number::New(info.Env(), pdb::measure_peak_gflops(int(threads), double(millis)));
}

// setLegacyMatmul (on): the lanes8 orders run the earlier kernels (same bits), for benchmarks only.
Napi::Value SetLegacyMatmul (const Napi::CallbackInfo& info) {
  if (info.Length() < 1 || !info[0].IsBoolean()) {
    Napi::TypeError::New(info.Env(), "setLegacyMatmul: on must be a boolean").ThrowAsJavaScriptException();
    return info.Env().Undefined();
  }
  pdb::set_matmul_legacy_tiles(info[0].As<Napi::Boolean>().Value());
  return info.Env().Undefined();
}

// setDecodeTile (on): off, the lanes8 orders in the decode tile's range (4..16 rows; 6..16 in avx2
// and portable) run the kernels before it (same bits), for benchmarks only.
Napi::Value SetDecodeTile (const Napi::CallbackInfo& info) {
  if (info.Length() < 1 || !info[0].IsBoolean()) {
    Napi::TypeError::New(info.Env(), "setDecodeTile: on must be a boolean").ThrowAsJavaScriptException();
    return info.Env().Undefined();
  }
  pdb::set_matmul_decode_tile(info[0].As<Napi::Boolean>().Value());
  return info.Env().Undefined();
}

// setExactProductFma (on): off, the decode tile's lanes8 steps never run fused, even where every
// product is exact (same bits), for benchmarks only.
Napi::Value SetExactProductFma (const Napi::CallbackInfo& info) {
  if (info.Length() < 1 || !info[0].IsBoolean()) {
    Napi::TypeError::New(info.Env(), "setExactProductFma: on must be a boolean").ThrowAsJavaScriptException();
    return info.Env().Undefined();
  }
  pdb::set_matmul_exact_fma(info[0].As<Napi::Boolean>().Value());
  return info.Env().Undefined();
}

// measureStreamGbps (threads, bytes, repeats)
Napi::Value MeasureStreamGbps (const Napi::CallbackInfo& info) {
  size_t threads = 0, bytes = 0, repeats = 0;
  if (!pdb::size_arg(info, 0, "threads", &threads) || !pdb::size_arg(info, 1, "bytes", &bytes) ||
      !pdb::size_arg(info, 2, "repeats", &repeats)) return info.Env().Undefined();
  if (threads < 1 || threads > 1024 || bytes > (size_t(1) << 34) || repeats < 1 || repeats > 100000) {
    Napi::RangeError::New(info.Env(), "threads must be 1..1024, bytes at most 16 GiB, repeats 1..100000")
      .ThrowAsJavaScriptException();
    return info.Env().Undefined();
  }
  return Napi::Number::New(info.Env(), pdb::measure_stream_gbps(int(threads), bytes, int(repeats)));
}

}  // namespace

static Napi::Object Init (Napi::Env env, Napi::Object exports) {
  // The kernel ISA, once per load (isa.h): PD_KERNELS_ISA=avx512|avx2|portable forces one.
  const char* requested = std::getenv("PD_KERNELS_ISA");
  std::string isa_error;
  if (!pdb::select_kernel_isa(requested == nullptr ? "" : requested, &isa_error)) {
    Napi::Error::New(env, "pdb_kernels: " + isa_error).ThrowAsJavaScriptException();
    return exports;
  }
  Napi::Array isas = Napi::Array::New(env);
  if (pdb::avx512_usable()) isas.Set(isas.Length(), Napi::String::New(env, "avx512"));
  if (pdb::avx2_usable()) isas.Set(isas.Length(), Napi::String::New(env, "avx2"));
  isas.Set(isas.Length(), Napi::String::New(env, "portable"));
  exports.Set("abiVersion", Napi::Number::New(env, 10));
  exports.Set("isa", Napi::String::New(env, pdb::kernels().name));
  exports.Set("isas", isas);
  exports.Set("minParallelWork", Napi::Number::New(env, double(pdb::kernel_pool_on() ? pdb::kMinPoolWork : pdb::kMinParallelWork)));
  exports.Set("threadPool", Napi::Boolean::New(env, pdb::kernel_pool_on()));
  exports.Set("matmulF32", Napi::Function::New(env, MatmulF32, "matmulF32"));
  exports.Set("matmulBf16", Napi::Function::New(env, MatmulBf16, "matmulBf16"));
  exports.Set("matmulBf16Grouped", Napi::Function::New(env, pdb::MatmulBf16GroupedEntry, "matmulBf16Grouped"));
  exports.Set("moeExperts", Napi::Function::New(env, pdb::MoeExpertsEntry, "moeExperts"));
  exports.Set("packStripsF32", Napi::Function::New(env, PackStripsF32, "packStripsF32"));
  exports.Set("packStripsBf16", Napi::Function::New(env, PackStripsBf16, "packStripsBf16"));
  exports.Set("rmsNorm", Napi::Function::New(env, RmsNorm, "rmsNorm"));
  exports.Set("fmathArray", Napi::Function::New(env, pdb::FmathArrayEntry, "fmathArray"));
  exports.Set("attentionMqa", Napi::Function::New(env, pdb::AttentionMqaEntry, "attentionMqa"));
  exports.Set("indexerScores", Napi::Function::New(env, pdb::IndexerScoresEntry, "indexerScores"));
  exports.Set("softmaxPool", Napi::Function::New(env, pdb::SoftmaxPoolEntry, "softmaxPool"));
  exports.Set("ropeRows", Napi::Function::New(env, pdb::RopeRowsEntry, "ropeRows"));
  exports.Set("roundBf16Array", Napi::Function::New(env, pdb::RoundBf16ArrayEntry, "roundBf16Array"));
  exports.Set("hcPost", Napi::Function::New(env, pdb::HcPostEntry, "hcPost"));
  exports.Set("hcCollapse", Napi::Function::New(env, pdb::HcCollapseEntry, "hcCollapse"));
  exports.Set("unweightedNormRows", Napi::Function::New(env, pdb::UnweightedNormRowsEntry, "unweightedNormRows"));
  exports.Set("topkRows", Napi::Function::New(env, pdb::TopkRowsEntry, "topkRows"));
  exports.Set("mxRoundTrip", Napi::Function::New(env, pdb::MxRoundTripEntry, "mxRoundTrip"));
  exports.Set("decodeBf16Array", Napi::Function::New(env, pdb::DecodeBf16ArrayEntry, "decodeBf16Array"));
  exports.Set("exactBf16Codes", Napi::Function::New(env, pdb::ExactBf16CodesEntry, "exactBf16Codes"));
  pdb::RegisterMlxCpu(env, exports);
  exports.Set("setThreads", Napi::Function::New(env, SetThreads, "setThreads"));
  exports.Set("getThreads", Napi::Function::New(env, GetThreads, "getThreads"));
  exports.Set("measurePeakGflops", Napi::Function::New(env, MeasurePeakGflops, "measurePeakGflops"));
  exports.Set("setLegacyMatmul", Napi::Function::New(env, SetLegacyMatmul, "setLegacyMatmul"));
  exports.Set("setDecodeTile", Napi::Function::New(env, SetDecodeTile, "setDecodeTile"));
  exports.Set("setExactProductFma", Napi::Function::New(env, SetExactProductFma, "setExactProductFma"));
  exports.Set("measureStreamGbps", Napi::Function::New(env, MeasureStreamGbps, "measureStreamGbps"));
  return exports;
}

NODE_API_MODULE(pdb_kernels, Init)
