// The matmul: the lanes8 orders at 4..16 rows (6..16 in avx2 and portable) by matmul_decode.h's
// decode tile (each widened weight vector meets every row), at m >= 17 by matmul_lanes.h's
// lane-major tiles across output columns; at fewer rows (and when the bench asks for the earlier
// kernels) output columns split between threads, each range computed by dot_tile.h's tiles, or, in
// the AVX-512 variant, by matmul_zmm.h's 512-bit tiles (the same bits, two dot products per
// register); the sequential-fma order by matmul_seq.h's tiles across output columns.
#include "dot_tile.h"
#include "isa_kernels.h"
#include "matmul_decode.h"
#include "matmul_lanes.h"
#include "matmul_seq.h"
#include "parallel.h"
#if defined(PDB_ISA_AVX512)
#include "matmul_zmm.h"
#endif

namespace pdb {
namespace PDB_ISA_NS {

namespace {

// Output columns are handed to threads in multiples of this (a tile width).
constexpr size_t kColumnGrain = 8;

template <class W, DotOrder O>
void matmul_tiles (const float* x, size_t m, size_t k, const typename W::Code* w, size_t n, float* y,
                   bool to_bf16, int threads) {
  if (m == 0 || n == 0) return;
  parallel_ranges(n, kColumnGrain, threads, [&](size_t j0, size_t j1) {
    dot_columns<W, O>(x, m, k, w, y, n, to_bf16, j0, j1);
  });
}

template <class W>
void matmul (const float* x, size_t m, size_t k, const typename W::Code* w, size_t n, float* y,
             bool to_bf16, MatmulOrder order, int threads) {
  if (matmul_decode_tile() && decode::usable(m)) {
    if (order == MatmulOrder::kLanes8Fma) return decode::matmul<W, true>(x, m, k, w, n, y, to_bf16, threads);
    if (order == MatmulOrder::kLanes8) return decode::matmul<W, false>(x, m, k, w, n, y, to_bf16, threads);
  }
  if (!matmul_legacy_tiles() && lanes::usable(m)) {
    if (order == MatmulOrder::kLanes8Fma) return lanes::matmul<W, true>(x, m, k, w, n, y, to_bf16, threads);
    if (order == MatmulOrder::kLanes8) return lanes::matmul<W, false>(x, m, k, w, n, y, to_bf16, threads);
  }
#if defined(PDB_ISA_AVX512)
  if (n > 0 && zmm::usable(m, k)) {
    if (order == MatmulOrder::kLanes8Fma) return zmm::matmul<W, true>(x, m, k, w, n, y, to_bf16, threads);
    if (order == MatmulOrder::kLanes8) return zmm::matmul<W, false>(x, m, k, w, n, y, to_bf16, threads);
  }
#endif
  switch (order) {
    case MatmulOrder::kSequentialFma: return seq::matmul<W>(x, m, k, w, n, y, to_bf16, threads, false);
    case MatmulOrder::kSequentialFmaPacked: return seq::matmul<W>(x, m, k, w, n, y, to_bf16, threads, true);
    case MatmulOrder::kBlocks128: return matmul_tiles<W, DotOrder::kBlocks128>(x, m, k, w, n, y, to_bf16, threads);
    case MatmulOrder::kLanes8Fma: return matmul_tiles<W, DotOrder::kLanes8Fma>(x, m, k, w, n, y, to_bf16, threads);
    default: return matmul_tiles<W, DotOrder::kLanes8>(x, m, k, w, n, y, to_bf16, threads);
  }
}

}  // namespace

void matmul_f32 (const float* x, size_t m, size_t k, const float* w, size_t n, float* y,
                 bool round_bf16, MatmulOrder order, int threads) {
  matmul<WeightF32>(x, m, k, w, n, y, round_bf16, order, threads);
}

void matmul_bf16 (const float* x, size_t m, size_t k, const uint16_t* w, size_t n, float* y,
                  bool round_bf16, MatmulOrder order, int threads) {
  matmul<WeightBf16>(x, m, k, w, n, y, round_bf16, order, threads);
}

}  // namespace PDB_ISA_NS
}  // namespace pdb
