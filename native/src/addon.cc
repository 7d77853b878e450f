// Entry point of the pdb_kernels addon: each kernel family registers itself here.
#include <napi.h>

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("abiVersion", Napi::Number::New(env, 1));
  return exports;
}

NODE_API_MODULE(pdb_kernels, Init)
