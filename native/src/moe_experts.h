// A MoE layer's routed experts for n tokens, after the router: each expert on the rows routed to it
// (ascending token, then pick), gate_up, the clamped SwiGLU, down, each output scaled by its routing
// weight, and the sum over a token's experts in ascending expert id (src/kernels/moe-experts.ts is
// the reference, src/model/engine/moe.ts the caller). Both projections of all experts run as one
// grouped matmul each (matmul_grouped.h); the elementwise steps run over all experts' rows at once.
#pragma once

#include <cstddef>
#include <cstdint>

#include "matmul.h"

namespace pdb {

struct MoeExpertsArgs {
  const float* x;              // [n, hidden]
  size_t n, hidden, inter, experts, topk;
  const uint16_t* const* gate_up;  // per expert [2 * inter, hidden] bf16 codes (gate rows, then up rows)
  const uint16_t* const* down;     // per expert [hidden, inter]
  const int32_t* picks;        // [n, topk] expert ids, each < experts
  const float* weights;        // [n, topk] routing weights
  float limit;                 // the SwiGLU clamp
  bool round_bf16;             // the activation rounding points (bf16 activations) or none (f32)
  MatmulOrder order;
  float* routed;               // [n, hidden] out: the weighted sum (not rounded after the sum)
};

void moe_experts (const MoeExpertsArgs& a);

}  // namespace pdb
