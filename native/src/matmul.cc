// Register-tiled matmul. A tile computes MR x NR dot products side by side, one __m256 of
// 8 lanes per dot product, so each dot product still follows kernel_order.h exactly: tiling
// only interleaves independent dot products, it never changes what is added to what.
#include "matmul.h"

#include "kernel_order.h"
#include "parallel.h"

namespace pdb {

namespace {

// Output columns are handed to threads in multiples of this (a tile width).
constexpr size_t kColumnGrain = 8;

template <class W, int MR, int NR>
void tile (const float* x, size_t k, const typename W::Code* w, size_t n, float* y, bool to_bf16) {
  const size_t k8 = k - k % 8;
  __m256 acc[MR][NR];
  for (int r = 0; r < MR; r++)
    for (int c = 0; c < NR; c++) acc[r][c] = _mm256_setzero_ps();
  for (size_t i = 0; i < k8; i += 8) {
    __m256 xv[MR];
    for (int r = 0; r < MR; r++) xv[r] = _mm256_loadu_ps(x + r * k + i);
    for (int c = 0; c < NR; c++) {
      const __m256 wv = W::load8(w + c * k + i);
      for (int r = 0; r < MR; r++) acc[r][c] = _mm256_add_ps(acc[r][c], _mm256_mul_ps(xv[r], wv));
    }
  }
  for (int r = 0; r < MR; r++) {
    for (int c = 0; c < NR; c++) {
      float s = lane_tree(acc[r][c]);
      for (size_t i = k8; i < k; i++) s = s + x[r * k + i] * W::load1(w + c * k + i);
      y[r * n + c] = finish_output(s, to_bf16);
    }
  }
}

// One row of x against up to 8 weight rows (8 independent add chains keep both FP adders busy).
template <class W>
void row_tile (const float* x, size_t k, const typename W::Code* w, size_t n, float* y, bool b, size_t cols) {
  switch (cols) {
    case 1: tile<W, 1, 1>(x, k, w, n, y, b); break;
    case 2: tile<W, 1, 2>(x, k, w, n, y, b); break;
    case 3: tile<W, 1, 3>(x, k, w, n, y, b); break;
    case 4: tile<W, 1, 4>(x, k, w, n, y, b); break;
    case 5: tile<W, 1, 5>(x, k, w, n, y, b); break;
    case 6: tile<W, 1, 6>(x, k, w, n, y, b); break;
    case 7: tile<W, 1, 7>(x, k, w, n, y, b); break;
    default: tile<W, 1, 8>(x, k, w, n, y, b); break;
  }
}

// Two rows of x against up to 4 weight rows.
template <class W>
void pair_tile (const float* x, size_t k, const typename W::Code* w, size_t n, float* y, bool b, size_t cols) {
  switch (cols) {
    case 1: tile<W, 2, 1>(x, k, w, n, y, b); break;
    case 2: tile<W, 2, 2>(x, k, w, n, y, b); break;
    case 3: tile<W, 2, 3>(x, k, w, n, y, b); break;
    default: tile<W, 2, 4>(x, k, w, n, y, b); break;
  }
}

// Weight rows of one panel stay in the L2 cache while every row pair of x passes over them.
constexpr size_t kPanelBytes = size_t(256) << 10;

// All m rows for output columns [j0, j1), panel by panel.
template <class W>
void column_range (const float* x, size_t m, size_t k, const typename W::Code* w, size_t n,
                   float* y, bool to_bf16, size_t j0, size_t j1) {
  const size_t row_bytes = k * sizeof(typename W::Code);
  size_t panel = row_bytes == 0 ? j1 - j0 : kPanelBytes / row_bytes;
  panel = panel < 8 ? 8 : panel - panel % 8;
  for (size_t p0 = j0; p0 < j1; p0 += panel) {
    const size_t p1 = p0 + panel < j1 ? p0 + panel : j1;
    size_t i = 0;
    for (; i + 2 <= m; i += 2) {
      for (size_t j = p0; j < p1; j += 4) {
        pair_tile<W>(x + i * k, k, w + j * k, n, y + i * n + j, to_bf16, p1 - j < 4 ? p1 - j : 4);
      }
    }
    if (i < m) {
      for (size_t j = p0; j < p1; j += 8) {
        row_tile<W>(x + i * k, k, w + j * k, n, y + i * n + j, to_bf16, p1 - j < 8 ? p1 - j : 8);
      }
    }
  }
}

template <class W>
void matmul (const float* x, size_t m, size_t k, const typename W::Code* w, size_t n, float* y,
             bool to_bf16, int threads) {
  if (m == 0 || n == 0) return;
  parallel_ranges(n, kColumnGrain, threads, [&](size_t j0, size_t j1) {
    column_range<W>(x, m, k, w, n, y, to_bf16, j0, j1);
  });
}

}  // namespace

void matmul_f32 (const float* x, size_t m, size_t k, const float* w, size_t n, float* y,
                 bool round_bf16, int threads) {
  matmul<WeightF32>(x, m, k, w, n, y, round_bf16, threads);
}

void matmul_bf16 (const float* x, size_t m, size_t k, const uint16_t* w, size_t n, float* y,
                  bool round_bf16, int threads) {
  matmul<WeightBf16>(x, m, k, w, n, y, round_bf16, threads);
}

}  // namespace pdb
