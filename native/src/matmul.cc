// The matmul: output columns split between threads, each range computed by dot_tile.h's tiles.
#include "dot_tile.h"
#include "isa_kernels.h"
#include "parallel.h"

namespace pdb {
namespace PDB_ISA_NS {

namespace {

// Output columns are handed to threads in multiples of this (a tile width).
constexpr size_t kColumnGrain = 8;

template <class W, DotOrder O>
void matmul (const float* x, size_t m, size_t k, const typename W::Code* w, size_t n, float* y,
             bool to_bf16, int threads) {
  if (m == 0 || n == 0) return;
  parallel_ranges(n, kColumnGrain, threads, [&](size_t j0, size_t j1) {
    dot_columns<W, O>(x, m, k, w, y, n, to_bf16, j0, j1);
  });
}

}  // namespace

void matmul_f32 (const float* x, size_t m, size_t k, const float* w, size_t n, float* y,
                 bool round_bf16, bool blocks128, int threads) {
  if (blocks128) matmul<WeightF32, DotOrder::kBlocks128>(x, m, k, w, n, y, round_bf16, threads);
  else matmul<WeightF32, DotOrder::kLanes8>(x, m, k, w, n, y, round_bf16, threads);
}

void matmul_bf16 (const float* x, size_t m, size_t k, const uint16_t* w, size_t n, float* y,
                  bool round_bf16, bool blocks128, int threads) {
  if (blocks128) matmul<WeightBf16, DotOrder::kBlocks128>(x, m, k, w, n, y, round_bf16, threads);
  else matmul<WeightBf16, DotOrder::kLanes8>(x, m, k, w, n, y, round_bf16, threads);
}

}  // namespace PDB_ISA_NS
}  // namespace pdb
