#include <cstdint>
#include <string>
#include <vector>

#include "args.h"
#include "entries.h"
#include "moe_experts.h"

namespace pdb {

namespace {

// Every element of a JavaScript array as a Uint16Array of exactly `length` codes, or an error thrown.
bool code_arrays (Napi::Env env, const Napi::Value& v, const char* name, size_t length, std::vector<const uint16_t*>* out) {
  if (!v.IsArray()) {
    Napi::TypeError::New(env, std::string(name) + " must be an array of Uint16Array").ThrowAsJavaScriptException();
    return false;
  }
  const Napi::Array list = v.As<Napi::Array>();
  for (uint32_t i = 0; i < list.Length(); i++) {
    const std::string at = std::string(name) + "[" + std::to_string(i) + "]";
    const auto codes = typed_value<uint16_t>(env, list.Get(i), napi_uint16_array, at, "Uint16Array");
    if (!codes.ok) return false;
    if (codes.length != length) {
      Napi::RangeError::New(env, at + " has " + std::to_string(codes.length) + " codes, expected " + std::to_string(length)).ThrowAsJavaScriptException();
      return false;
    }
    out->push_back(codes.data);
  }
  return true;
}

}  // namespace

// moeExperts (x, n, hidden, inter, gateUps, downs, picks, weights, topk, limit, roundBf16, order,
// routed): moe_experts.h; gateUps[e] [2 inter, hidden], downs[e] [hidden, inter], picks and
// weights [n, topk], routed [n, hidden] written.
Napi::Value MoeExpertsEntry (const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  MoeExpertsArgs a{};
  const auto x = typed_array<float>(info, 0, napi_float32_array, "x", "Float32Array");
  if (!x.ok || !size_arg(info, 1, "n", &a.n) || !size_arg(info, 2, "hidden", &a.hidden) || !size_arg(info, 3, "inter", &a.inter)) return env.Undefined();
  if (!check_length(env, "x", x.length, a.n, a.hidden, "n x hidden")) return env.Undefined();
  size_t gate_up_len = 0, down_len = 0;
  if (__builtin_mul_overflow(2 * a.inter, a.hidden, &gate_up_len) || __builtin_mul_overflow(a.inter, a.hidden, &down_len)) {
    Napi::RangeError::New(env, "hidden x inter is too large").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  std::vector<const uint16_t*> gate_up, down;
  if (!code_arrays(env, info[4], "gateUps", gate_up_len, &gate_up) || !code_arrays(env, info[5], "downs", down_len, &down)) return env.Undefined();
  if (gate_up.size() != down.size() || gate_up.empty()) {
    Napi::RangeError::New(env, "gateUps and downs must hold the same number of experts, at least one").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  a.experts = gate_up.size();
  const auto picks = typed_array<int32_t>(info, 6, napi_int32_array, "picks", "Int32Array");
  if (!picks.ok) return env.Undefined();
  const auto weights = typed_array<float>(info, 7, napi_float32_array, "weights", "Float32Array");
  if (!weights.ok || !size_arg(info, 8, "topk", &a.topk)) return env.Undefined();
  if (!check_length(env, "picks", picks.length, a.n, a.topk, "n x topk") ||
      !check_length(env, "weights", weights.length, a.n, a.topk, "n x topk")) return env.Undefined();
  for (size_t i = 0; i < picks.length; i++) {
    if (picks.data[i] < 0 || size_t(picks.data[i]) >= a.experts) {
      Napi::RangeError::New(env, "picks[" + std::to_string(i) + "] is not an expert id below " + std::to_string(a.experts)).ThrowAsJavaScriptException();
      return env.Undefined();
    }
  }
  if (info.Length() < 13 || !info[9].IsNumber() || !bool_arg(info, 10, "roundBf16", &a.round_bf16) || !unpacked_order_arg(info, 11, &a.order)) {
    if (!env.IsExceptionPending()) Napi::TypeError::New(env, "limit must be a number").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  const auto routed = typed_array<float>(info, 12, napi_float32_array, "routed", "Float32Array");
  if (!routed.ok || !check_length(env, "routed", routed.length, a.n, a.hidden, "n x hidden")) return env.Undefined();
  a.x = x.data;
  a.gate_up = gate_up.data();
  a.down = down.data();
  a.picks = picks.data;
  a.weights = weights.data;
  a.limit = float(info[9].As<Napi::Number>().DoubleValue());
  a.routed = routed.data;
  moe_experts(a);
  return info[12];
}

}  // namespace pdb
