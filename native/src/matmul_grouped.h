// Several matmuls of one shape in one call: y_g[m_g, n] = x_g[m_g, k] · W_g[n, k]^T for each group
// g (a MoE layer's experts, each on the rows routed to it). The threads split the groups' output
// columns between them once for the whole call, instead of once per matmul.
#pragma once

#include <cstddef>
#include <cstdint>

#include "matmul.h"

namespace pdb {

struct MatmulGroupBf16 {
  const float* x;     // [m, k]
  size_t m;           // rows (0: the group is skipped)
  const uint16_t* w;  // [n, k] bf16 codes
  float* y;           // [m, n]
};

// Every y_g[i, j] is bit for bit matmul_bf16's (x_g, m_g, k, W_g, n) output (i, j) in `order`: a
// column range of W_g is computed by matmul_bf16 on those rows of W_g (which columns a call holds
// never changes an output's bits, matmul.h). Not for kSequentialFmaPacked (W in strips).
void matmul_bf16_grouped (const MatmulGroupBf16* groups, size_t count, size_t k, size_t n, bool round_bf16,
                          MatmulOrder order, int threads);

}  // namespace pdb
