// y[m, n] = x[m, k] · W[n, k]^T with W an nn.Linear weight (row-major [out, in]).
#pragma once

#include <cstddef>
#include <cstdint>

namespace pdb {

// The accumulation order of every dot product (docs/kernels.md, "Accumulation order"); the values
// are the addon's order codes (src/kernels/native.ts, MATMUL_ORDER_CODES).
enum class MatmulOrder : int {
  kLanes8 = 0,     // kernel_order.h: 8 lanes, the lane tree, the k % 8 tail
  kBlocks128 = 1,  // each 128-long block in that order, block sums added in order
  kLanes8Fma = 2,  // kLanes8 with every lane and tail step one fused multiply-add
  kSequentialFma = 3,  // one fused multiply-add chain per output over k in increasing index (matmul_seq.h)
  kSequentialFmaPacked = 4,  // the same order, W already packed in strips of 16 rows (pack_strips.h)
};

// Every y[i, j] is the dot product of x row i and W row j in `order` (dot_tile.h, matmul_seq.h), then
// finish_output (optional bf16 rounding, canonical NaN). Work is split between threads by output
// column ranges only. The caller guarantees the buffer sizes; for kSequentialFmaPacked, w is W in
// strips (pack_strips.h): ceil(n / 16) * 16 * k codes.
void matmul_f32 (const float* x, size_t m, size_t k, const float* w, size_t n, float* y,
                 bool round_bf16, MatmulOrder order, int threads);
void matmul_bf16 (const float* x, size_t m, size_t k, const uint16_t* w, size_t n, float* y,
                  bool round_bf16, MatmulOrder order, int threads);

// The lanes8 orders at m >= 8 run matmul_lanes.h's tiles; with this set they run the earlier
// kernels (dot_tile.h, matmul_zmm.h) instead, the same bits. For benchmarks only: setLegacyMatmul.
bool matmul_legacy_tiles ();
void set_matmul_legacy_tiles (bool on);

// The lanes8 orders at 4..16 rows (6..16 in avx2 and portable) run matmul_decode.h's decode tile
// (default on); off, they run the kernels before it (dot_tile.h below 8 rows, the lane-major tiles
// from 8), the same bits. For benchmarks only: setDecodeTile.
bool matmul_decode_tile ();
void set_matmul_decode_tile (bool on);

// The decode tile's lanes8 steps run as one fma where every product is exact (exact_products.h;
// default on); off, as a rounded mul then add throughout, the same bits. For benchmarks only:
// setExactProductFma.
bool matmul_exact_fma ();
void set_matmul_exact_fma (bool on);

}  // namespace pdb
