// Register-tiled dot products: MR rows of x against NR rows of W side by side, one F8 of 8 lanes
// per dot product, so each dot product still follows kernel_order.h exactly. Tiling only interleaves
// independent dot products; it never changes what is added to what. Shared by the matmul, the
// attention scores and the indexer scores.
#pragma once

#include <cstddef>

#include "kernel_order.h"

namespace pdb {
namespace PDB_ISA_NS {

// The two accumulation orders of a dot product (docs/kernels.md, "Accumulation order").
enum class DotOrder {
  kLanes8,     // the whole length in 8 lanes, the lane tree, then the k % 8 tail
  kBlocks128,  // each block of 128 (and the last, shorter one) in the kLanes8 order, block sums added in order
  kLanes8Fma,  // kLanes8 with each lane step and tail step one fused multiply-add (one rounding)
};

constexpr size_t kOrderBlock = 128;

namespace tile_detail {

// Lanes over [i0, i0 + len8) of MR x NR dot products, reduced to one float each (tree, then the
// scalar tail up to i0 + len).
template <class W, int MR, int NR, bool Fused = false>
inline void lanes_part (const float* x, size_t k, const typename W::Code* w, size_t i0, size_t len,
                        float part[MR][NR]) {
  // One hint per W row and 64-byte line, kPrefetchCodes ahead in the row (past its end, the next
  // row): the reads of a streamed W overlap the arithmetic (docs/kernels.md, "Decode tile": m = 2
  // and 3 about 1.1-1.3x faster from memory on the Zen 5 host). A hint only: no effect on any value.
  constexpr size_t kPrefetchCodes = 768;
  const size_t len8 = len - len % 8;
  F8 acc[MR][NR];
  for (int r = 0; r < MR; r++)
    for (int c = 0; c < NR; c++) acc[r][c] = f8_zero();
  for (size_t i = i0; i < i0 + len8; i += 8) {
    F8 xv[MR];
    for (int r = 0; r < MR; r++) xv[r] = f8_load(x + r * k + i);
    for (int c = 0; c < NR; c++) {
      if (i % W::kCodesPerLine == 0) __builtin_prefetch(w + c * k + i + kPrefetchCodes, 0, 3);
      const F8 wv = W::load8(w + c * k + i);
      for (int r = 0; r < MR; r++) {
        if constexpr (Fused) acc[r][c] = f8_fma(xv[r], wv, acc[r][c]);
        else acc[r][c] = acc[r][c] + xv[r] * wv;
      }
    }
  }
  for (int r = 0; r < MR; r++) {
    for (int c = 0; c < NR; c++) {
      float s = lane_tree(acc[r][c]);
      for (size_t i = i0 + len8; i < i0 + len; i++) {
        if constexpr (Fused) s = fma1(x[r * k + i], W::load1(w + c * k + i), s);
        else s = s + x[r * k + i] * W::load1(w + c * k + i);
      }
      part[r][c] = s;
    }
  }
}

}  // namespace tile_detail

// y[r * ldy + c] for r < MR, c < NR: the dot product of x row r and W row c (rows k apart), in
// `order`, then finish_output (optional bf16 rounding, canonical NaN).
template <class W, int MR, int NR, DotOrder order>
void dot_tile (const float* x, size_t k, const typename W::Code* w, float* y, size_t ldy, bool to_bf16) {
  float s[MR][NR];
  if constexpr (order == DotOrder::kLanes8) {
    tile_detail::lanes_part<W, MR, NR>(x, k, w, 0, k, s);
  } else if constexpr (order == DotOrder::kLanes8Fma) {
    tile_detail::lanes_part<W, MR, NR, true>(x, k, w, 0, k, s);
  } else {
    for (int r = 0; r < MR; r++)
      for (int c = 0; c < NR; c++) s[r][c] = 0.0f;
    for (size_t b0 = 0; b0 < k; b0 += kOrderBlock) {
      float part[MR][NR];
      tile_detail::lanes_part<W, MR, NR>(x, k, w, b0, k - b0 < kOrderBlock ? k - b0 : kOrderBlock, part);
      for (int r = 0; r < MR; r++)
        for (int c = 0; c < NR; c++) s[r][c] = s[r][c] + part[r][c];
    }
  }
  for (int r = 0; r < MR; r++)
    for (int c = 0; c < NR; c++) y[r * ldy + c] = finish_output(s[r][c], to_bf16);
}

namespace tile_detail {

// One row of x against up to 8 weight rows (8 independent add chains keep both FP adders busy).
template <class W, DotOrder O>
void row_tile (const float* x, size_t k, const typename W::Code* w, float* y, size_t ldy, bool b, size_t cols) {
  switch (cols) {
    case 1: dot_tile<W, 1, 1, O>(x, k, w, y, ldy, b); break;
    case 2: dot_tile<W, 1, 2, O>(x, k, w, y, ldy, b); break;
    case 3: dot_tile<W, 1, 3, O>(x, k, w, y, ldy, b); break;
    case 4: dot_tile<W, 1, 4, O>(x, k, w, y, ldy, b); break;
    case 5: dot_tile<W, 1, 5, O>(x, k, w, y, ldy, b); break;
    case 6: dot_tile<W, 1, 6, O>(x, k, w, y, ldy, b); break;
    case 7: dot_tile<W, 1, 7, O>(x, k, w, y, ldy, b); break;
    default: dot_tile<W, 1, 8, O>(x, k, w, y, ldy, b); break;
  }
}

// Two rows of x against up to 4 weight rows.
template <class W, DotOrder O>
void pair_tile (const float* x, size_t k, const typename W::Code* w, float* y, size_t ldy, bool b, size_t cols) {
  switch (cols) {
    case 1: dot_tile<W, 2, 1, O>(x, k, w, y, ldy, b); break;
    case 2: dot_tile<W, 2, 2, O>(x, k, w, y, ldy, b); break;
    case 3: dot_tile<W, 2, 3, O>(x, k, w, y, ldy, b); break;
    default: dot_tile<W, 2, 4, O>(x, k, w, y, ldy, b); break;
  }
}

}  // namespace tile_detail

// Weight rows of one panel stay in the L2 cache while every row pair of x passes over them.
constexpr size_t kPanelBytes = size_t(256) << 10;

// y[i * ldy + j] = dot(x row i, W row j) for all m rows of x and W rows j in [j0, j1), panel by panel.
template <class W, DotOrder O>
void dot_columns (const float* x, size_t m, size_t k, const typename W::Code* w, float* y, size_t ldy,
                  bool to_bf16, size_t j0, size_t j1) {
  const size_t row_bytes = k * sizeof(typename W::Code);
  size_t panel = row_bytes == 0 ? j1 - j0 : kPanelBytes / row_bytes;
  panel = panel < 8 ? 8 : panel - panel % 8;
  for (size_t p0 = j0; p0 < j1; p0 += panel) {
    const size_t p1 = p0 + panel < j1 ? p0 + panel : j1;
    size_t i = 0;
    for (; i + 2 <= m; i += 2) {
      for (size_t j = p0; j < p1; j += 4) {
        tile_detail::pair_tile<W, O>(x + i * k, k, w + j * k, y + i * ldy + j, ldy, to_bf16, p1 - j < 4 ? p1 - j : 4);
      }
    }
    if (i < m) {
      for (size_t j = p0; j < p1; j += 8) {
        tile_detail::row_tile<W, O>(x + i * k, k, w + j * k, y + i * ldy + j, ldy, to_bf16, p1 - j < 8 ? p1 - j : 8);
      }
    }
  }
}

}  // namespace PDB_ISA_NS
}  // namespace pdb
