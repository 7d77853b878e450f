// The decode tile: the lanes8 and lanes8-fma orders at kMinRows..kMaxRows rows (a batched decode
// step's projections, the rows routed to one expert; docs/kernels.md, "Decode tile"). At these sizes
// each weight is used by only a few rows, so loading and widening it costs as much as the arithmetic.
// Output columns go in groups of kGroupCols, k in chunks of kChunk, the weights asked for ahead of
// their use (a cache hint). In the avx512 variant one 512-bit register holds the lane chains of two
// rows (x packed in row pairs once per call) against a weight vector broadcast to both halves, the
// weights widened in registers straight from W, 8 at a time into both halves, for every pair of the
// tile; elsewhere the group's chunk is widened once into a float32 buffer that stays in L1 and every
// row of x meets each widened vector from there, one F8 per output.
//
// Every output keeps the one-row order of dot_tile.h exactly: 8 lane chains (lane l: k indices l,
// l + 8, ... in increasing order, a rounded mul then add, or one fma, per step), the lane tree, then
// the k % 8 tail one product at a time. The chains wait in a small buffer between chunks (storing a
// float32 and loading it back changes nothing); which rows or columns share a tile, the chunking and
// the split between threads (by output columns only) never change what is added to what.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernel_order.h"
#include "parallel.h"
#if defined(PDB_ISA_AVX512)
#include <type_traits>

#include "exact_products.h"
#include "matmul.h"
#include "matmul_zmm.h"
#endif

namespace pdb {
namespace PDB_ISA_NS {
namespace decode {

// The range, measured on a 2-core AVX-512 host (docs/kernels.md, "Decode tile"): below kMinRows
// dot_tile.h's pair tiles, which widen each weight vector in registers for two rows, are as fast or
// faster; above kMaxRows the lane-major tiles (matmul_lanes.h) pay for their packing.
#if defined(PDB_ISA_AVX512)
constexpr size_t kMinRows = 4;
#else
constexpr size_t kMinRows = 6;
#endif
constexpr size_t kMaxRows = 16;
constexpr size_t kGroupCols = 8;    // weight rows widened together (the split between threads is in these)
constexpr size_t kChunk = 256;      // k per widening (8 rows x 256 floats = 8 KiB) and per exact-products check

inline bool usable (size_t m) { return m >= kMinRows && m <= kMaxRows; }

#if !defined(PDB_ISA_AVX512)
// Weight rows [c0, c0 + nc), k in [k0, k0 + len8), widened exactly: row c at wg + c * kChunk.
template <class W>
PDB_INLINE void widen (const typename W::Code* w, size_t k, size_t c0, size_t nc, size_t k0, size_t len8, float* wg) {
  for (size_t c = 0; c < nc; c++) {
    const typename W::Code* src = w + (c0 + c) * k + k0;
    float* d = wg + c * kChunk;
    for (size_t i = 0; i < len8; i += 8) f8_store(d + i, W::load8(src + i));
  }
}

// Hint the chunk kAhead widenings after (c0, k0) into the caches (in a thread's column range
// ending at j1: this group's next chunks, then the next group's first), so its memory reads overlap
// the arithmetic in between. A hint only: no effect on any value.
template <class W>
PDB_INLINE void prefetch_ahead (const typename W::Code* w, size_t k, size_t c0, size_t k0, size_t j1) {
  constexpr size_t kAhead = 2;  // measured against 1, 4 and 8 (docs/kernels.md, "Decode tile")
  const size_t k8 = k - k % 8;
  const size_t chunks = k8 == 0 ? 1 : (k8 + kChunk - 1) / kChunk;
  const size_t at = k0 / kChunk + kAhead;
  const size_t pc0 = c0 + (at / chunks) * kGroupCols, pk0 = (at % chunks) * kChunk;
  if (pc0 >= j1) return;
  const size_t nc = j1 - pc0 < kGroupCols ? j1 - pc0 : kGroupCols, len8 = k8 - pk0 < kChunk ? k8 - pk0 : kChunk;
  for (size_t c = 0; c < nc; c++) {
    const typename W::Code* src = w + (pc0 + c) * k + pk0;
    for (size_t i = 0; i < len8; i += W::kCodesPerLine) __builtin_prefetch(src + i, 0, 3);
  }
}
#endif

// The group's outputs from their 8 lane chains (lanes_of(r, c): row r, column c0 + c): the lane tree,
// the k % 8 tail in increasing index, finish_output, as dot_tile.h.
template <class W, bool Fused, class Lanes>
inline void finish_group (const float* x, size_t m, size_t k, const typename W::Code* w, size_t n, float* y,
                          bool to_bf16, size_t c0, size_t nc, const Lanes& lanes_of) {
  const size_t k8 = k - k % 8;
  for (size_t r = 0; r < m; r++) {
    const float* xr = x + r * k;
    for (size_t c = 0; c < nc; c++) {
      float s = lane_tree(f8_load(lanes_of(r, c)));
      const typename W::Code* wr = w + (c0 + c) * k;
      for (size_t i = k8; i < k; i++) {
        if constexpr (Fused) s = fma1(xr[i], W::load1(wr + i), s);
        else s = s + xr[i] * W::load1(wr + i);
      }
      y[r * n + c0 + c] = finish_output(s, to_bf16);
    }
  }
}

#if !defined(PDB_ISA_AVX512)
// The AVX2 and portable tile: one F8 of 8 lane chains per output.
constexpr int kRowsPerTile = 4;
constexpr int kColsPerTile = 2;     // 8 accumulators, 2 weight vectors, x and a product: 12 of 16 registers

// MR rows (x rows k apart, from the chunk's start) by NC widened weight rows (kChunk apart) over
// `len8` (a multiple of 8) of k: lane chains in and out of acc (row r, column c at acc + (r * kGroupCols
// + c) * 8), starting from +0 when `first`.
template <bool Fused, int MR, int NC>
PDB_INLINE void tile (const float* x, size_t k, const float* wg, size_t len8, float* acc, bool first) {
  F8 a[MR][NC];
  for (int r = 0; r < MR; r++)
    for (int c = 0; c < NC; c++) a[r][c] = first ? f8_zero() : f8_load(acc + (r * kGroupCols + c) * 8);
  for (size_t i = 0; i < len8; i += 8) {
    F8 wv[NC];
    for (int c = 0; c < NC; c++) wv[c] = f8_load(wg + c * kChunk + i);
    for (int r = 0; r < MR; r++) {
      const F8 xv = f8_load(x + r * k + i);
      for (int c = 0; c < NC; c++) {
        if constexpr (Fused) a[r][c] = f8_fma(xv, wv[c], a[r][c]);
        else a[r][c] = a[r][c] + xv * wv[c];
      }
    }
  }
  for (int r = 0; r < MR; r++)
    for (int c = 0; c < NC; c++) f8_store(acc + (r * kGroupCols + c) * 8, a[r][c]);
}

template <bool Fused, int MR>
inline void tile_cols (size_t nc, const float* x, size_t k, const float* wg, size_t len8, float* acc, bool first) {
  if (nc == 1) return tile<Fused, MR, 1>(x, k, wg, len8, acc, first);
  return tile<Fused, MR, kColsPerTile>(x, k, wg, len8, acc, first);
}

template <bool Fused>
inline void tile_any (size_t mr, size_t nc, const float* x, size_t k, const float* wg, size_t len8, float* acc,
                      bool first) {
  switch (mr) {
    case 1: return tile_cols<Fused, 1>(nc, x, k, wg, len8, acc, first);
    case 2: return tile_cols<Fused, 2>(nc, x, k, wg, len8, acc, first);
    case 3: return tile_cols<Fused, 3>(nc, x, k, wg, len8, acc, first);
    default: return tile_cols<Fused, kRowsPerTile>(nc, x, k, wg, len8, acc, first);
  }
}

// y rows [0, m), columns [j0, j1).
template <class W, bool Fused>
void columns (const float* x, size_t m, size_t k, const typename W::Code* w, size_t n, float* y, bool to_bf16,
              size_t j0, size_t j1) {
  alignas(64) float wg[kGroupCols * kChunk];
  alignas(64) float acc[kMaxRows * kGroupCols * 8];
  const size_t k8 = k - k % 8;
  for (size_t c0 = j0; c0 < j1; c0 += kGroupCols) {
    const size_t nc = j1 - c0 < kGroupCols ? j1 - c0 : kGroupCols;
    for (size_t k0 = 0; k0 < k8 || k0 == 0; k0 += kChunk) {
      const size_t len8 = k8 - k0 < kChunk ? k8 - k0 : kChunk;
      widen<W>(w, k, c0, nc, k0, len8, wg);
      prefetch_ahead<W>(w, k, c0, k0, j1);
      for (size_t r0 = 0; r0 < m; r0 += kRowsPerTile) {
        const size_t mr = m - r0 < size_t(kRowsPerTile) ? m - r0 : size_t(kRowsPerTile);
        for (size_t c = 0; c < nc; c += kColsPerTile) {
          const size_t cc = nc - c < size_t(kColsPerTile) ? nc - c : size_t(kColsPerTile);
          tile_any<Fused>(mr, cc, x + r0 * k + k0, k, wg + c * kChunk, len8, acc + (r0 * kGroupCols + c) * 8, k0 == 0);
        }
      }
      if (k8 == 0) break;
    }
    finish_group<W, Fused>(x, m, k, w, n, y, to_bf16, c0, nc,
                           [&](size_t r, size_t c) { return acc + (r * kGroupCols + c) * 8; });
  }
}

#else
constexpr int kZmmPairs = 4;        // 4 pairs x 4 columns: 16 accumulators, 8 x registers, a widened weight vector
constexpr int kZmmCols = 4;

// 8 consecutive weights of one row as float32, exactly, in both 256-bit halves (a bf16 code is the
// high half of its float): the load broadcasts the 8 codes to every 128-bit lane and one byte
// shuffle per lane moves lane L's four codes (the first four in lanes 0 and 2, the last four in 1
// and 3) into the high halves of its dwords, zeroing the low halves. Two shuffles per 16 weights,
// where widening 16 and splitting them between the halves took three and a shift; float32 weights
// need only the broadcast load.
template <class W>
PDB_INLINE __m512 load8_both (const typename W::Code* p) {
  if constexpr (std::is_same_v<typename W::Code, uint16_t>) {
    const __m512i codes = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    // Per 128-bit lane: dword d = code (L % 2) * 4 + d in its high half; -1 (0xff) bytes read as zero.
    const __m512i to_high = _mm512_set_epi8(
        15, 14, -1, -1, 13, 12, -1, -1, 11, 10, -1, -1, 9, 8, -1, -1,
        7, 6, -1, -1, 5, 4, -1, -1, 3, 2, -1, -1, 1, 0, -1, -1,
        15, 14, -1, -1, 13, 12, -1, -1, 11, 10, -1, -1, 9, 8, -1, -1,
        7, 6, -1, -1, 5, 4, -1, -1, 3, 2, -1, -1, 1, 0, -1, -1);
    return _mm512_castsi512_ps(_mm512_shuffle_epi8(codes, to_high));
  } else {
    return _mm512_broadcast_f32x8(_mm256_loadu_ps(p));
  }
}

// How far ahead in its weight row the tile asks for the next line: one hint per row and 64-byte line,
// spread over the arithmetic (past a row's end it reaches the next row, which the tile or the next
// one reads next). Measured on the 2-core Zen 5 host, 1 thread, 32 matrices of 4096 x 1024 streamed
// from memory: m = 8 0.63-0.78 ms a call at 256 to 512 codes ahead, against 0.85-0.92 ms for a burst
// of hints per chunk two chunks ahead (docs/kernels.md, "Decode tile"). A hint only: no effect on any value.
constexpr size_t kPrefetchCodes = 384;

// The AVX-512 tile: one 512-bit register holds the 8 lane chains of TWO rows (x rows 2p and 2p + 1,
// packed in pairs once per call as matmul_zmm.h's pack_pairs does) against one weight row's 8
// weights broadcast to both halves. The weights are widened in registers straight from W, 8 at a
// time into both halves (load8_both), and each such vector serves every pair of the tile: nothing
// is stored and read back, so at m <= 8 (one pair tile) each weight is read from memory and
// widened exactly once. Each lane still adds its own products in increasing index (the step at i,
// then at i + 8), one rounded operation each, so the bits are the 8-lane tile's.
template <class W, bool Fused, int PP, int NC>
PDB_INLINE void pair_tile (const float* xp, size_t pair_stride, const typename W::Code* w, size_t k, size_t len8,
                           float* acc, bool first) {
  __m512 a[PP][NC];
  for (int p = 0; p < PP; p++)
    for (int c = 0; c < NC; c++) a[p][c] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + (p * kGroupCols + c) * 16);
  const auto step = [&](int c, const __m512* xv, __m512 wv) {
    for (int p = 0; p < PP; p++) {
      if constexpr (Fused) a[p][c] = _mm512_fmadd_ps(xv[p], wv, a[p][c]);
      else a[p][c] = _mm512_add_ps(a[p][c], _mm512_mul_ps(xv[p], wv));
    }
  };
  size_t i = 0;
  for (; i + 16 <= len8; i += 16) {
    __m512 xa[PP], xb[PP];
    for (int p = 0; p < PP; p++) {
      xa[p] = _mm512_loadu_ps(xp + p * pair_stride + i * 2);
      xb[p] = _mm512_loadu_ps(xp + p * pair_stride + i * 2 + 16);
    }
    for (int c = 0; c < NC; c++) {
      if (i % W::kCodesPerLine == 0) __builtin_prefetch(w + c * k + i + kPrefetchCodes, 0, 3);
      step(c, xa, load8_both<W>(w + c * k + i));           // weights i .. i + 7 in both halves
      step(c, xb, load8_both<W>(w + c * k + i + 8));       // then i + 8 .. i + 15
    }
  }
  if (i < len8) {                                           // the last 8
    __m512 xa[PP];
    for (int p = 0; p < PP; p++) xa[p] = _mm512_loadu_ps(xp + p * pair_stride + i * 2);
    for (int c = 0; c < NC; c++) step(c, xa, load8_both<W>(w + c * k + i));
  }
  for (int p = 0; p < PP; p++)
    for (int c = 0; c < NC; c++) _mm512_storeu_ps(acc + (p * kGroupCols + c) * 16, a[p][c]);
}

template <class W, bool Fused, int PP>
inline void pair_tile_cols (size_t nc, const float* xp, size_t ps, const typename W::Code* w, size_t k, size_t len8,
                            float* acc, bool first) {
  switch (nc) {
    case 1: return pair_tile<W, Fused, PP, 1>(xp, ps, w, k, len8, acc, first);
    case 2: return pair_tile<W, Fused, PP, 2>(xp, ps, w, k, len8, acc, first);
    case 3: return pair_tile<W, Fused, PP, 3>(xp, ps, w, k, len8, acc, first);
    default: return pair_tile<W, Fused, PP, kZmmCols>(xp, ps, w, k, len8, acc, first);
  }
}

template <class W, bool Fused>
inline void pair_tile_any (size_t pp, size_t nc, const float* xp, size_t ps, const typename W::Code* w, size_t k,
                           size_t len8, float* acc, bool first) {
  switch (pp) {
    case 1: return pair_tile_cols<W, Fused, 1>(nc, xp, ps, w, k, len8, acc, first);
    case 2: return pair_tile_cols<W, Fused, 2>(nc, xp, ps, w, k, len8, acc, first);
    case 3: return pair_tile_cols<W, Fused, 3>(nc, xp, ps, w, k, len8, acc, first);
    default: return pair_tile_cols<W, Fused, kZmmPairs>(nc, xp, ps, w, k, len8, acc, first);
  }
}

// Whether a chunk's lane steps may run fused in the unfused order: x (its range `xr`) and the chunk's
// weights give exact products (exact_products.h), so fma is the rounded mul then add, bit for bit.
template <class W>
PDB_INLINE bool chunk_exact (const exact::Range& xr, const typename W::Code* w, size_t k, size_t c0, size_t nc,
                             size_t k0, size_t len8) {
  if constexpr (std::is_same_v<typename W::Code, uint16_t>) {
    return xr.ok && exact::products_exact(xr, exact::w_range(w, k, c0, nc, k0, len8));
  } else {
    (void)w; (void)k; (void)c0; (void)nc; (void)k0; (void)len8;
    return false;                       // float32 weights: products are rounded
  }
}

// y rows [0, m), columns [j0, j1), x packed in pairs at xp (pair p at xp + p * k8 * 2), its range xr.
template <class W, bool Fused>
void pair_columns (const float* x, const float* xp, const exact::Range& xr, size_t m, size_t k,
                   const typename W::Code* w, size_t n, float* y, bool to_bf16, size_t j0, size_t j1) {
  alignas(64) float acc[(kMaxRows / 2) * kGroupCols * 16];
  const size_t k8 = k - k % 8, pairs = (m + 1) / 2, pair_stride = k8 * 2;
  for (size_t c0 = j0; c0 < j1; c0 += kGroupCols) {
    const size_t nc = j1 - c0 < kGroupCols ? j1 - c0 : kGroupCols;
    for (size_t k0 = 0; k0 < k8 || k0 == 0; k0 += kChunk) {
      const size_t len8 = k8 - k0 < kChunk ? k8 - k0 : kChunk;
      const bool fused = Fused || chunk_exact<W>(xr, w, k, c0, nc, k0, len8);
      for (size_t p0 = 0; p0 < pairs; p0 += kZmmPairs) {
        const size_t pp = pairs - p0 < size_t(kZmmPairs) ? pairs - p0 : size_t(kZmmPairs);
        for (size_t c = 0; c < nc; c += kZmmCols) {
          const size_t cc = nc - c < size_t(kZmmCols) ? nc - c : size_t(kZmmCols);
          const float* xt = xp + p0 * pair_stride + k0 * 2;
          const typename W::Code* wt = w + (c0 + c) * k + k0;
          float* at = acc + (p0 * kGroupCols + c) * 16;
          if (fused) pair_tile_any<W, true>(pp, cc, xt, pair_stride, wt, k, len8, at, k0 == 0);
          else pair_tile_any<W, false>(pp, cc, xt, pair_stride, wt, k, len8, at, k0 == 0);
        }
      }
      if (k8 == 0) break;
    }
    finish_group<W, Fused>(x, m, k, w, n, y, to_bf16, c0, nc,
                           [&](size_t r, size_t c) { return acc + ((r / 2) * kGroupCols + c) * 16 + (r % 2) * 8; });
  }
}

// x's pairs, kept between calls (fresh pages cost a fault each; one call at a time per thread).
inline Scratch& pair_scratch () {
  thread_local Scratch scratch;
  return scratch;
}
#endif

// The whole matmul: output columns split between threads in groups of kGroupCols.
template <class W, bool Fused>
void matmul (const float* x, size_t m, size_t k, const typename W::Code* w, size_t n, float* y, bool to_bf16,
             int threads) {
  if (m == 0 || n == 0) return;
#if defined(PDB_ISA_AVX512)
  const size_t k8 = k - k % 8, pairs = (m + 1) / 2;
  Scratch& scratch = pair_scratch();
  scratch.resize(pairs * k8 * 2 + 1);
  float* xp = scratch.data();
  zmm::pack_pairs(x, m, k, k8, xp, 0, pairs);
  // The lanes8 order's steps run fused where the products are exact (the same bits, one instruction).
  exact::Range xr;
  xr.ok = false;
  if (!Fused && matmul_exact_fma()) xr = exact::x_range(xp, pairs * k8 * 2);
  parallel_ranges(n, kGroupCols, threads, [&](size_t j0, size_t j1) {
    pair_columns<W, Fused>(x, xp, xr, m, k, w, n, y, to_bf16, j0, j1);
  });
#else
  parallel_ranges(n, kGroupCols, threads, [&](size_t j0, size_t j1) {
    columns<W, Fused>(x, m, k, w, n, y, to_bf16, j0, j1);
  });
#endif
}

}  // namespace decode
}  // namespace PDB_ISA_NS
}  // namespace pdb
