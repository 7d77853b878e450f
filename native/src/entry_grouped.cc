#include <cstdint>
#include <string>
#include <vector>

#include "args.h"
#include "entries.h"
#include "matmul_grouped.h"
#include "parallel.h"

namespace pdb {

bool unpacked_order_arg (const Napi::CallbackInfo& info, size_t index, MatmulOrder* out) {
  size_t code = 0;
  if (!size_arg(info, index, "order", &code)) return false;
  if (code > size_t(MatmulOrder::kSequentialFma)) {
    Napi::RangeError::New(info.Env(), "order must be a matmul order code of an unpacked W (0 lanes8, 1 blocks128, 2 lanes8-fma, 3 sequential-fma)").ThrowAsJavaScriptException();
    return false;
  }
  *out = MatmulOrder(int(code));
  return true;
}

// matmulBf16Grouped (xs, ms, k, ws, n, outs, roundBf16, order): for each g, outs[g] [ms[g], n] =
// xs[g] [ms[g], k] · ws[g] [n, k]^T (matmul_grouped.h); order 0 to 3 (not the packed 4).
Napi::Value MatmulBf16GroupedEntry (const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 6 || !info[0].IsArray() || !info[1].IsArray() || !info[3].IsArray() || !info[5].IsArray()) {
    Napi::TypeError::New(env, "matmulBf16Grouped: xs, ms, ws and outs must be arrays").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  const Napi::Array xs = info[0].As<Napi::Array>(), ms = info[1].As<Napi::Array>();
  const Napi::Array ws = info[3].As<Napi::Array>(), outs = info[5].As<Napi::Array>();
  const uint32_t count = xs.Length();
  if (ms.Length() != count || ws.Length() != count || outs.Length() != count) {
    Napi::RangeError::New(env, "matmulBf16Grouped: xs, ms, ws and outs must have one entry per group").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  size_t k = 0, n = 0;
  MatmulOrder order = MatmulOrder::kLanes8;
  if (!size_arg(info, 2, "k", &k) || !size_arg(info, 4, "n", &n)) return env.Undefined();
  const bool round_bf16 = info.Length() > 6 && info[6].ToBoolean().Value();
  if (info.Length() > 7 && !unpacked_order_arg(info, 7, &order)) return env.Undefined();
  std::vector<MatmulGroupBf16> groups(count);
  size_t work = 0;
  for (uint32_t g = 0; g < count; g++) {
    const std::string at = "[" + std::to_string(g) + "]";
    size_t m = 0;
    if (!size_value(env, ms.Get(g), "ms" + at, &m)) return env.Undefined();
    const auto x = typed_value<float>(env, xs.Get(g), napi_float32_array, "xs" + at, "Float32Array");
    if (!x.ok) return env.Undefined();
    const auto w = typed_value<uint16_t>(env, ws.Get(g), napi_uint16_array, "ws" + at, "Uint16Array");
    if (!w.ok) return env.Undefined();
    const auto y = typed_value<float>(env, outs.Get(g), napi_float32_array, "outs" + at, "Float32Array");
    if (!y.ok) return env.Undefined();
    if (!check_length(env, ("xs" + at).c_str(), x.length, m, k, "ms x k") ||
        !check_length(env, ("ws" + at).c_str(), w.length, n, k, "n x k") ||
        !check_length(env, ("outs" + at).c_str(), y.length, m, n, "ms x n")) return env.Undefined();
    groups[g] = MatmulGroupBf16{x.data, m, w.data, y.data};
    size_t gw = 0;
    if (__builtin_mul_overflow(m * n, k, &gw) || __builtin_add_overflow(work, gw, &work)) work = SIZE_MAX;
  }
  matmul_bf16_grouped(groups.data(), count, k, n, round_bf16, order, threads_for(work));
  return info[5];
}

}  // namespace pdb
