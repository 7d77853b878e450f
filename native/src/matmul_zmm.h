// The AVX-512 matmul for the lanes8 and lanes8-fma orders (PDB_ISA_AVX512 only; docs/kernels.md,
// "512-bit tiles"). One 512-bit register holds the 8 lanes of TWO dot products: x rows 2p and 2p+1
// against the same W row. Every lane still adds its own products in increasing i, one rounded
// operation each (mul then add, or one fma), so the bits are those of dot_tile.h's 8-lane order; the
// wider register only computes two independent dot products side by side.
//
// Layout: x is copied once per call into row pairs, 8 floats of row 2p then 8 of row 2p+1 for each
// step of 8 in k (a zero row pads an odd m). W is copied (bf16 widened exactly) panel by panel and
// KC at a time into a buffer that stays in L1/L2; each tile's lane sums live in a per-thread buffer
// between k blocks (storing a float32 lane and loading it back changes nothing). The k % 8 tail, the
// lane tree and finish_output run once per output at the end, exactly as in dot_tile.h.
#pragma once

#if !defined(PDB_ISA_AVX512)
#error "matmul_zmm.h is for the PDB_ISA_AVX512 translation units only"
#endif

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernel_order.h"
#include "parallel.h"

namespace pdb {
namespace PDB_ISA_NS {
namespace zmm {

constexpr int kPairs = 4;         // row pairs per tile (8 rows of x)
constexpr int kCols = 6;          // W rows per tile: 4 x 6 = 24 accumulators, 4 x loads and 6 broadcasts per step
constexpr size_t kBlockK = 512;   // k per W copy (a multiple of 8)
constexpr size_t kMaxPanel = 96;  // W rows per panel
constexpr size_t kLanesBytes = size_t(512) << 10;  // per-thread lane sums: a panel shrinks to keep them in L2

// Below this many rows (or k below one step) the 8-lane tiles of dot_tile.h run instead.
constexpr size_t kMinRows = 8;
constexpr size_t kMinK = 64;

inline bool usable (size_t m, size_t k) { return m >= kMinRows && k >= kMinK; }

// PP pairs x CC W rows over kc (multiple of 8) steps of k starting at k0: lane sums in and out of `lanes`
// (tile (p, c) at lanes + (p * ldl + c) * 16), starting from +0 when `first`.
template <bool Fused, int PP, int CC>
inline void tile (const float* xp, size_t pair_stride, size_t k0, size_t kc, const float* wp, float* lanes,
                  size_t ldl, bool first) {
  __m512 acc[PP][CC];
  for (int p = 0; p < PP; p++)
    for (int c = 0; c < CC; c++) acc[p][c] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(lanes + (p * ldl + c) * 16);
  const float* xb = xp + k0 * 2;
  for (size_t i = 0; i < kc; i += 8) {
    __m512 xv[PP];
    for (int p = 0; p < PP; p++) xv[p] = _mm512_loadu_ps(xb + p * pair_stride + i * 2);
    for (int c = 0; c < CC; c++) {
      const __m512 wv = _mm512_broadcast_f32x8(_mm256_loadu_ps(wp + c * kc + i));
      for (int p = 0; p < PP; p++) {
        if constexpr (Fused) acc[p][c] = _mm512_fmadd_ps(xv[p], wv, acc[p][c]);
        else acc[p][c] = _mm512_add_ps(acc[p][c], _mm512_mul_ps(xv[p], wv));
      }
    }
  }
  for (int p = 0; p < PP; p++)
    for (int c = 0; c < CC; c++) _mm512_storeu_ps(lanes + (p * ldl + c) * 16, acc[p][c]);
}

template <bool Fused, int PP>
inline void tile_cols (const float* xp, size_t pair_stride, size_t k0, size_t kc, const float* wp, float* lanes,
                       size_t ldl, bool first, size_t cols) {
  switch (cols) {
    case 1: tile<Fused, PP, 1>(xp, pair_stride, k0, kc, wp, lanes, ldl, first); break;
    case 2: tile<Fused, PP, 2>(xp, pair_stride, k0, kc, wp, lanes, ldl, first); break;
    case 3: tile<Fused, PP, 3>(xp, pair_stride, k0, kc, wp, lanes, ldl, first); break;
    case 4: tile<Fused, PP, 4>(xp, pair_stride, k0, kc, wp, lanes, ldl, first); break;
    case 5: tile<Fused, PP, 5>(xp, pair_stride, k0, kc, wp, lanes, ldl, first); break;
    default: tile<Fused, PP, kCols>(xp, pair_stride, k0, kc, wp, lanes, ldl, first); break;
  }
}

template <bool Fused>
inline void tile_any (const float* xp, size_t pair_stride, size_t k0, size_t kc, const float* wp, float* lanes,
                      size_t ldl, bool first, size_t pairs, size_t cols) {
  switch (pairs) {
    case 1: tile_cols<Fused, 1>(xp, pair_stride, k0, kc, wp, lanes, ldl, first, cols); break;
    case 2: tile_cols<Fused, 2>(xp, pair_stride, k0, kc, wp, lanes, ldl, first, cols); break;
    case 3: tile_cols<Fused, 3>(xp, pair_stride, k0, kc, wp, lanes, ldl, first, cols); break;
    default: tile_cols<Fused, kPairs>(xp, pair_stride, k0, kc, wp, lanes, ldl, first, cols); break;
  }
}

// Pairs [p0, p1) of x [m, k] into row pairs over k8 = k - k % 8 (pair p at xp + p * k8 * 2).
inline void pack_pairs (const float* x, size_t m, size_t k, size_t k8, float* xp, size_t p0, size_t p1) {
  for (size_t p = p0; p < p1; p++) {
    const float* r0 = x + (2 * p) * k;
    const float* r1 = 2 * p + 1 < m ? r0 + k : nullptr;
    float* d = xp + p * k8 * 2;
    for (size_t i = 0; i < k8; i += 8) {
      _mm256_storeu_ps(d + i * 2, _mm256_loadu_ps(r0 + i));
      _mm256_storeu_ps(d + i * 2 + 8, r1 != nullptr ? _mm256_loadu_ps(r1 + i) : _mm256_setzero_ps());
    }
  }
}

// W rows [c0, c0 + nc), k in [k0, k0 + kc), widened to float32: row c at wp + c * kc.
template <class W>
inline void pack_panel (const typename W::Code* w, size_t k, size_t c0, size_t nc, size_t k0, size_t kc, float* wp) {
  for (size_t c = 0; c < nc; c++) {
    const typename W::Code* src = w + (c0 + c) * k + k0;
    float* d = wp + c * kc;
    for (size_t i = 0; i < kc; i += 8) f8_store(d + i, W::load8(src + i));
  }
}

// Hint the next panel copy's source into the caches while the tiles run (no effect on any value).
template <class W>
inline void prefetch_rows (const typename W::Code* w, size_t k, size_t c0, size_t nc, size_t k0, size_t kc,
                           size_t* next_line, size_t lines) {
  const size_t bytes = kc * sizeof(typename W::Code);
  const size_t per_row = (bytes + 63) / 64;
  const size_t total = nc * per_row;
  for (size_t q = 0; q < lines && *next_line < total; q++, (*next_line)++) {
    const size_t row = *next_line / per_row, line = *next_line % per_row;
    _mm_prefetch(reinterpret_cast<const char*>(w + (c0 + row) * k + k0) + line * 64, _MM_HINT_T0);
  }
}

// The calling thread's buffer for x's pairs and every thread's workspace: kept between calls, since
// fresh pages cost a fault each (shared by every instantiation; one call at a time per thread).
inline Scratch& call_scratch () {
  thread_local Scratch scratch;
  return scratch;
}

// What one thread needs: its lane sums and its W copy.
struct Workspace {
  float* lanes;  // pairs x panel tiles of 16
  float* wp;     // panel x kBlockK
};

// y rows [0, m), columns [j0, j1): every dot product in the lanes8 (Fused = false) or lanes8-fma order.
template <class W, bool Fused>
void columns (const float* x, const float* xp, size_t m, size_t k, const typename W::Code* w, size_t n, float* y,
              bool to_bf16, size_t j0, size_t j1, size_t panel, Workspace ws) {
  const size_t k8 = k - k % 8;
  const size_t pairs = (m + 1) / 2;
  const size_t pair_stride = k8 * 2;
  for (size_t c0 = j0; c0 < j1; c0 += panel) {
    const size_t nc = c0 + panel < j1 ? panel : j1 - c0;
    for (size_t k0 = 0; k0 < k8; k0 += kBlockK) {
      const size_t kc = k8 - k0 < kBlockK ? k8 - k0 : kBlockK;
      pack_panel<W>(w, k, c0, nc, k0, kc, ws.wp);
      // The next copy: this panel's next k block, or the next panel's first.
      size_t nk0 = k0 + kBlockK, nc0 = c0;
      if (nk0 >= k8) { nk0 = 0; nc0 = c0 + panel; }
      const size_t nnc = nc0 < j1 ? (nc0 + panel < j1 ? panel : j1 - nc0) : 0;
      const size_t nkc = k8 - nk0 < kBlockK ? k8 - nk0 : kBlockK;
      const size_t tiles = ((pairs + kPairs - 1) / kPairs) * ((nc + kCols - 1) / kCols);
      const size_t lines = (nnc * ((nkc * sizeof(typename W::Code) + 63) / 64) + tiles - 1) / tiles;
      size_t next_line = 0;
      for (size_t p0 = 0; p0 < pairs; p0 += kPairs) {
        const size_t pp = pairs - p0 < size_t(kPairs) ? pairs - p0 : size_t(kPairs);
        for (size_t c = 0; c < nc; c += kCols) {
          if (nnc > 0) prefetch_rows<W>(w, k, nc0, nnc, nk0, nkc, &next_line, lines);
          const size_t cc = nc - c < size_t(kCols) ? nc - c : size_t(kCols);
          tile_any<Fused>(xp + p0 * pair_stride, pair_stride, k0, kc, ws.wp + c * kc, ws.lanes + (p0 * panel + c) * 16,
                          panel, k0 == 0, pp, cc);
        }
      }
    }
    // Lane tree, the k % 8 tail in order, finish_output.
    for (size_t r = 0; r < m; r++) {
      const float* x_row = x + r * k;
      for (size_t c = 0; c < nc; c++) {
        const float* lane8 = ws.lanes + ((r / 2) * panel + c) * 16 + (r % 2) * 8;
        float s = lane_tree(f8_load(lane8));
        const typename W::Code* w_row = w + (c0 + c) * k;
        for (size_t i = k8; i < k; i++) {
          if constexpr (Fused) s = fma1(x_row[i], W::load1(w_row + i), s);
          else s = s + x_row[i] * W::load1(w_row + i);
        }
        y[r * n + c0 + c] = finish_output(s, to_bf16);
      }
    }
  }
}

// The W rows of one panel: as many as keep a thread's lane sums within kLanesBytes.
inline size_t panel_rows (size_t m) {
  const size_t pairs = (m + 1) / 2;
  size_t panel = kLanesBytes / (pairs * 16 * sizeof(float));
  if (panel > kMaxPanel) panel = kMaxPanel;
  panel -= panel % kCols;
  return panel < size_t(kCols) ? size_t(kCols) : panel;
}

// The whole matmul: x packed once, then one column range per thread (split in multiples of 8).
template <class W, bool Fused>
void matmul (const float* x, size_t m, size_t k, const typename W::Code* w, size_t n, float* y, bool to_bf16,
             int threads) {
  const size_t k8 = k - k % 8;
  const size_t pairs = (m + 1) / 2;
  const size_t panel = panel_rows(m);
  const size_t groups = (n + 7) / 8;
  const size_t chunks = threads < 1 ? 1 : (size_t(threads) < groups ? size_t(threads) : groups);
  const size_t lanes_floats = pairs * panel * 16, wp_floats = panel * kBlockK;
  Scratch& scratch = call_scratch();
  scratch.resize(pairs * k8 * 2 + chunks * (lanes_floats + wp_floats));
  float* xp = scratch.data();
  // The copy of x is split between the threads too (by pairs: a pure copy, nothing is summed), or
  // at prefill sizes the one thread copying would hold up the others.
  const int pack_threads = m * k >= kMinParallelWork / 4 ? threads : 1;
  parallel_ranges(pairs, 4, pack_threads, [&](size_t p0, size_t p1) { pack_pairs(x, m, k, k8, xp, p0, p1); });
  float* slots = xp + pairs * k8 * 2;
  struct Call {
    const float* x; const float* xp; size_t m, k; const typename W::Code* w; size_t n; float* y; bool to_bf16;
    size_t panel, groups, chunks, lanes_floats, wp_floats; float* slots;
  } call{x, xp, m, k, w, n, y, to_bf16, panel, groups, chunks, lanes_floats, wp_floats, slots};
  // Chunk t (one per thread) owns columns [8 * (t * groups / chunks), 8 * ((t + 1) * groups / chunks)).
  parallel_ranges(chunks, 1, int(chunks), [&call](size_t t0, size_t t1) {
    for (size_t t = t0; t < t1; t++) {
      const size_t j0 = 8 * (t * call.groups / call.chunks);
      size_t j1 = 8 * ((t + 1) * call.groups / call.chunks);
      if (j1 > call.n) j1 = call.n;
      if (j0 >= j1) continue;
      float* slot = call.slots + t * (call.lanes_floats + call.wp_floats);
      columns<W, Fused>(call.x, call.xp, call.m, call.k, call.w, call.n, call.y, call.to_bf16, j0, j1, call.panel,
                        Workspace{slot, slot + call.lanes_floats});
    }
  });
}

}  // namespace zmm
}  // namespace PDB_ISA_NS
}  // namespace pdb
