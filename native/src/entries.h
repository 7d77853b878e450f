// JavaScript entry points of the kernels added after matmul and RMSNorm, one file each
// (entry_*.cc); addon.cc registers them. Each checks types, sizes and indices again, so no
// call from JavaScript can make C++ read or write outside a buffer.
#pragma once

#include <napi.h>

#include "matmul.h"

namespace pdb {

Napi::Value FmathArrayEntry (const Napi::CallbackInfo& info);
Napi::Value AttentionMqaEntry (const Napi::CallbackInfo& info);
Napi::Value IndexerScoresEntry (const Napi::CallbackInfo& info);
Napi::Value SoftmaxPoolEntry (const Napi::CallbackInfo& info);
Napi::Value RopeRowsEntry (const Napi::CallbackInfo& info);
Napi::Value RoundBf16ArrayEntry (const Napi::CallbackInfo& info);
Napi::Value HcPostEntry (const Napi::CallbackInfo& info);
Napi::Value HcCollapseEntry (const Napi::CallbackInfo& info);
Napi::Value UnweightedNormRowsEntry (const Napi::CallbackInfo& info);
Napi::Value TopkRowsEntry (const Napi::CallbackInfo& info);
Napi::Value MxRoundTripEntry (const Napi::CallbackInfo& info);
Napi::Value DecodeBf16ArrayEntry (const Napi::CallbackInfo& info);
Napi::Value ExactBf16CodesEntry (const Napi::CallbackInfo& info);
Napi::Value MatmulBf16GroupedEntry (const Napi::CallbackInfo& info);
Napi::Value MoeExpertsEntry (const Napi::CallbackInfo& info);
// Argument `index` as the order of a matmul over an unpacked W (codes 0 to 3), or an error thrown (entry_grouped.cc).
bool unpacked_order_arg (const Napi::CallbackInfo& info, size_t index, MatmulOrder* out);
void RegisterMlxCpu (Napi::Env env, Napi::Object exports);  // entry_mlx_cpu.cc: the mlx-cpu cache math's kernels

}  // namespace pdb
