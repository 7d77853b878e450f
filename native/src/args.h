// Argument checks for the JavaScript entry points. The TypeScript layer validates first and
// raises NumericsError; these checks are the last line that keeps C++ from reading or writing
// outside a buffer whatever JavaScript passes in.
#pragma once

#include <napi.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace pdb {

// A typed array's element pointer and length, or an error already thrown into JavaScript.
template <class T>
struct View {
  T* data = nullptr;
  size_t length = 0;
  bool ok = false;
};

template <class T>
View<T> typed_array (const Napi::CallbackInfo& info, size_t index, napi_typedarray_type type,
                     const char* name, const char* type_name) {
  View<T> view;
  Napi::Env env = info.Env();
  if (index >= info.Length() || !info[index].IsTypedArray()) {
    Napi::TypeError::New(env, std::string(name) + " must be a " + type_name).ThrowAsJavaScriptException();
    return view;
  }
  napi_typedarray_type actual;
  size_t length = 0;
  void* data = nullptr;
  if (napi_get_typedarray_info(env, info[index], &actual, &length, &data, nullptr, nullptr) != napi_ok ||
      actual != type) {
    Napi::TypeError::New(env, std::string(name) + " must be a " + type_name).ThrowAsJavaScriptException();
    return view;
  }
  view.data = static_cast<T*>(data);
  view.length = length;
  view.ok = true;
  return view;
}

// A JavaScript value (an array element) as a typed array of `type`, or a TypeError naming it.
template <class T>
View<T> typed_value (Napi::Env env, const Napi::Value& v, napi_typedarray_type type, const std::string& name, const char* type_name) {
  View<T> view;
  napi_typedarray_type actual;
  size_t length = 0;
  void* data = nullptr;
  if (!v.IsTypedArray() || napi_get_typedarray_info(env, v, &actual, &length, &data, nullptr, nullptr) != napi_ok || actual != type) {
    Napi::TypeError::New(env, name + " must be a " + type_name).ThrowAsJavaScriptException();
    return view;
  }
  view.data = static_cast<T*>(data);
  view.length = length;
  view.ok = true;
  return view;
}

// A non-negative integer size below 2^52 (so products of two sizes are checked, not wrapped), from
// a JavaScript value (an argument or an array element) named `name` in the error.
inline bool size_value (Napi::Env env, const Napi::Value& value, const std::string& name, size_t* out) {
  if (!value.IsNumber()) {
    Napi::TypeError::New(env, name + " must be a number").ThrowAsJavaScriptException();
    return false;
  }
  const double v = value.As<Napi::Number>().DoubleValue();
  if (!(v >= 0 && v <= 4503599627370496.0) || v != double(int64_t(v))) {
    Napi::RangeError::New(env, name + " must be a non-negative integer").ThrowAsJavaScriptException();
    return false;
  }
  *out = size_t(v);
  return true;
}

// Argument `index` as such a size.
inline bool size_arg (const Napi::CallbackInfo& info, size_t index, const char* name, size_t* out) {
  if (index >= info.Length()) {
    Napi::TypeError::New(info.Env(), std::string(name) + " must be a number").ThrowAsJavaScriptException();
    return false;
  }
  return size_value(info.Env(), info[index], name, out);
}

// A boolean argument, or a TypeError naming it.
inline bool bool_arg (const Napi::CallbackInfo& info, size_t index, const char* name, bool* out) {
  if (index >= info.Length() || !info[index].IsBoolean()) {
    Napi::TypeError::New(info.Env(), std::string(name) + " must be a boolean").ThrowAsJavaScriptException();
    return false;
  }
  *out = info[index].As<Napi::Boolean>().Value();
  return true;
}

// a * b must equal `length` exactly (no overflow) or a RangeError naming the buffer is thrown.
inline bool check_length (Napi::Env env, const char* name, size_t length, size_t a, size_t b,
                          const char* shape) {
  size_t product = 0;
  if (__builtin_mul_overflow(a, b, &product) || product != length) {
    Napi::RangeError::New(env, std::string(name) + " has " + std::to_string(length) +
                          " elements, expected " + shape + " = " + std::to_string(a) + " x " +
                          std::to_string(b)).ThrowAsJavaScriptException();
    return false;
  }
  return true;
}

// a * b * c, or SIZE_MAX when the product overflows (check_length then rejects it).
inline size_t mul3 (size_t a, size_t b, size_t c) {
  size_t ab = 0, abc = 0;
  if (__builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, &abc)) return SIZE_MAX;
  return abc;
}

// A finite number argument, as float32 (the value is rounded to float32 as the references do).
inline bool float_arg (const Napi::CallbackInfo& info, size_t index, const char* name, float* out) {
  if (index >= info.Length() || !info[index].IsNumber()) {
    Napi::TypeError::New(info.Env(), std::string(name) + " must be a number").ThrowAsJavaScriptException();
    return false;
  }
  *out = float(info[index].As<Napi::Number>().DoubleValue());
  return true;
}

// Every index in [0, bound), or a RangeError naming the array and the first bad position.
inline bool check_indices (Napi::Env env, const char* name, const int32_t* v, size_t length, size_t bound) {
  for (size_t i = 0; i < length; i++) {
    if (v[i] < 0 || size_t(v[i]) >= bound) {
      Napi::RangeError::New(env, std::string(name) + "[" + std::to_string(i) + "] = " + std::to_string(v[i]) +
                            " is outside [0, " + std::to_string(bound) + ")").ThrowAsJavaScriptException();
      return false;
    }
  }
  return true;
}

}  // namespace pdb
