// Top-k per row for the indexer (src/kernels/topk.ts topkIndices with order 'index', its
// reference; src/kernels/topk-rows.ts the batched form). Row r considers
// scores[r * stride, r * stride + lengths[r]) and keeps the min(k, lengths[r]) best entries:
// higher score first, the same score (+0 == -0) to the lower index; -Inf and NaN are never kept.
// The kept indices are written ascending to indices[r * k, r * k + counts[r]), the rest of the
// row's slots -1. The set is unique under that total order, so any thread count gives it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pdb {

void topk_rows (const float* scores, size_t rows, size_t stride, const int32_t* lengths, size_t k,
                int32_t* indices, int32_t* counts, int threads);

}  // namespace pdb
