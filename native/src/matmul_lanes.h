// The matmul for the lanes8 and lanes8-fma orders at m >= kMinRows (docs/kernels.md, "Lane-major
// tiles"): vectorized across OUTPUT COLUMNS instead of across k. In those orders every output has 8
// lane chains (lane l: k-indices l, l + 8, ... in increasing order, one rounded mul then add, or one
// fma, per step), a fixed tree and a sequential tail. Each lane chain is a sequential dot product of
// its own, so a vector register can hold lane l of V::kWidth neighbouring outputs: one broadcast x
// value meets kWidth columns per step, as a BLAS kernel does. Lane l of every output is finished
// before lane l + 1 starts; the 8 lane sums wait in a small per-thread buffer (storing a float32 and
// loading it back changes nothing). Then the tree and the tail run vertically, kWidth outputs at a
// time, with the same rounded adds as kernel_order.h's lane_tree. Tiling over rows and columns, the
// split between threads and the padding rows and columns (zeros, results dropped) only choose which
// outputs are computed together, never what is added to what.
//
// Layouts (T = k8 / 8, k8 = k - k % 8):
//   x packed once per call, per tile of MR rows: (l, t, r) at tile + (l * T + t) * MR + r, rows past m zero;
//   W packed per strip of SW = NV * kWidth columns (bf16 widened exactly): lane part (l, t, c) at
//   (l * T + t) * SW + c, the k % 8 tail (j, c) at (k8 + j) * SW + c, columns past n zero.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernel_order.h"
#include "parallel.h"

#if defined(PDB_ISA_AVX512)
#include <immintrin.h>
#endif

namespace pdb {
namespace PDB_ISA_NS {
namespace lanes {

// Below this many rows the 8-lane tiles (dot_tile.h) run: packing a strip of W costs about as much
// as multiplying it with a few rows.
constexpr size_t kMinRows = 8;

inline bool usable (size_t m) { return m >= kMinRows; }

// The vector of columns: F8 (8 columns) everywhere, a 512-bit register (16 columns) in the avx512
// variant. Each operation rounds once per lane exactly as the F8 one does.
struct Vec8 {
  using T = F8;
  static constexpr size_t kWidth = 8;
  static constexpr int kRows = 6;   // 6 x 2 = 12 accumulators, 2 W loads, 1 broadcast: 15 of 16 registers
  static constexpr int kVecs = 2;
  static PDB_INLINE T zero () { return f8_zero(); }
  static PDB_INLINE T set1 (float a) { return f8_set1(a); }
  static PDB_INLINE T load (const float* p) { return f8_load(p); }
  static PDB_INLINE void store (float* p, T a) { f8_store(p, a); }
  static PDB_INLINE T add (T a, T b) { return a + b; }
  static PDB_INLINE T mul (T a, T b) { return a * b; }
  static PDB_INLINE T fma (T a, T b, T c) { return f8_fma(a, b, c); }
};

#if defined(PDB_ISA_AVX512)
struct Vec16 {
  using T = __m512;
  static constexpr size_t kWidth = 16;
  static constexpr int kRows = 12;  // 12 x 2 = 24 accumulators, 2 W loads, 1 broadcast: 27 of 32 registers
  static constexpr int kVecs = 2;
  static PDB_INLINE T zero () { return _mm512_setzero_ps(); }
  static PDB_INLINE T set1 (float a) { return _mm512_set1_ps(a); }
  static PDB_INLINE T load (const float* p) { return _mm512_loadu_ps(p); }
  static PDB_INLINE void store (float* p, T a) { _mm512_storeu_ps(p, a); }
  static PDB_INLINE T add (T a, T b) { return _mm512_add_ps(a, b); }
  static PDB_INLINE T mul (T a, T b) { return _mm512_mul_ps(a, b); }
  static PDB_INLINE T fma (T a, T b, T c) { return _mm512_fmadd_ps(a, b, c); }
};
using Vec = Vec16;
#else
using Vec = Vec8;
#endif

constexpr int kRows = Vec::kRows;
constexpr size_t kStripCols = Vec::kVecs * Vec::kWidth;

// One lane chain of MR rows (of a packed tile of kRows) by the strip's columns over `steps` steps:
// part[r * SW + c] = the lane's sum.
template <bool Fused, int MR>
inline void lane_chain (const float* xa, const float* wb, size_t steps, float* part) {
  constexpr int NV = Vec::kVecs;
  constexpr size_t SW = kStripCols;
  typename Vec::T acc[MR][NV];
  for (int r = 0; r < MR; r++)
    for (int v = 0; v < NV; v++) acc[r][v] = Vec::zero();
  for (size_t t = 0; t < steps; t++) {
    typename Vec::T b[NV];
    for (int v = 0; v < NV; v++) b[v] = Vec::load(wb + t * SW + v * Vec::kWidth);
    for (int r = 0; r < MR; r++) {
      const typename Vec::T a = Vec::set1(xa[t * kRows + r]);
      for (int v = 0; v < NV; v++) {
        if constexpr (Fused) acc[r][v] = Vec::fma(a, b[v], acc[r][v]);
        else acc[r][v] = Vec::add(acc[r][v], Vec::mul(a, b[v]));
      }
    }
  }
  for (int r = 0; r < MR; r++)
    for (int v = 0; v < NV; v++) Vec::store(part + r * SW + v * Vec::kWidth, acc[r][v]);
}

// The last tile of a call may hold fewer rows: it runs only as many as it needs, rounded up to a
// quarter (avx512) or a third (6-row tiles) of a tile, so m = 16 does not compute 24 rows.
template <bool Fused>
inline void lane_chain_rows (size_t mr, const float* xa, const float* wb, size_t steps, float* part) {
  constexpr int q = kRows / (kRows % 4 == 0 ? 4 : 3);
  if (mr <= size_t(q)) return lane_chain<Fused, q>(xa, wb, steps, part);
  if (mr <= size_t(2 * q)) return lane_chain<Fused, 2 * q>(xa, wb, steps, part);
  if (kRows % 4 == 0 && mr <= size_t(3 * q)) return lane_chain<Fused, (kRows % 4 == 0 ? 3 * q : kRows)>(xa, wb, steps, part);
  return lane_chain<Fused, kRows>(xa, wb, steps, part);
}

// x rows [row0, row0 + kRows) into one packed tile (rows past m zero).
inline void pack_x_tile (const float* x, size_t m, size_t k, size_t row0, float* xt) {
  const size_t k8 = k - k % 8, steps = k8 / 8;
  for (int r = 0; r < kRows; r++) {
    const size_t row = row0 + size_t(r);
    const float* xr = x + row * k;
    for (size_t t = 0; t < steps; t++)
      for (size_t l = 0; l < 8; l++) xt[(l * steps + t) * kRows + r] = row < m ? xr[8 * t + l] : 0.0f;
  }
}

// W rows [c0, c0 + nc) (nc <= SW) into one packed strip.
template <class W>
inline void pack_strip (const typename W::Code* w, size_t k, size_t c0, size_t nc, float* wp) {
  constexpr size_t SW = kStripCols;
  const size_t k8 = k - k % 8, steps = k8 / 8;
  for (size_t g = 0; g < SW; g += 8) {
    const size_t valid = g >= nc ? 0 : (nc - g < 8 ? nc - g : 8);
    if (valid == 8) {
      const typename W::Code* src[8];
      for (int q = 0; q < 8; q++) src[q] = w + (c0 + g + q) * k;
      for (size_t t = 0; t < steps; t++) {
        F8 v[8];
        for (int q = 0; q < 8; q++) v[q] = W::load8(src[q] + 8 * t);
        f8_transpose8(v);  // v[l] = the 8 columns' k-index 8t + l
        for (size_t l = 0; l < 8; l++) f8_store(wp + (l * steps + t) * SW + g, v[l]);
      }
      for (size_t i = k8; i < k; i++)
        for (int q = 0; q < 8; q++) wp[i * SW + g + q] = W::load1(src[q] + i);
    } else {
      for (size_t i = 0; i < k; i++) {
        const size_t at = i < k8 ? ((i % 8) * steps + i / 8) * SW : i * SW;
        for (size_t q = 0; q < 8; q++) wp[at + g + q] = q < valid ? W::load1(w + (c0 + g + q) * k + i) : 0.0f;
      }
    }
  }
}

// The tree, the tail and finish_output for a tile's rows [0, mr) and the strip's columns [0, nc).
template <bool Fused>
inline void finish_tile (const float* part, const float* x, size_t row0, size_t mr, size_t k, const float* wp,
                         float* y, size_t n, size_t c0, size_t nc, bool to_bf16, float* sums) {
  constexpr size_t SW = kStripCols;
  constexpr size_t lane_stride = size_t(kRows) * SW;
  const size_t k8 = k - k % 8;
  for (size_t r = 0; r < mr; r++) {
    const float* xr = x + (row0 + r) * k;
    for (size_t v = 0; v < SW; v += Vec::kWidth) {
      const float* p = part + r * SW + v;
      typename Vec::T l[8];
      for (int q = 0; q < 8; q++) l[q] = Vec::load(p + q * lane_stride);
      // ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), as lane_tree.
      typename Vec::T s = Vec::add(Vec::add(Vec::add(l[0], l[4]), Vec::add(l[2], l[6])),
                                   Vec::add(Vec::add(l[1], l[5]), Vec::add(l[3], l[7])));
      for (size_t i = k8; i < k; i++) {
        const typename Vec::T a = Vec::set1(xr[i]), b = Vec::load(wp + i * SW + v);
        if constexpr (Fused) s = Vec::fma(a, b, s);
        else s = Vec::add(s, Vec::mul(a, b));
      }
      Vec::store(sums + v, s);
    }
    float* yr = y + (row0 + r) * n + c0;
    for (size_t c = 0; c < nc; c++) yr[c] = finish_output(sums[c], to_bf16);
  }
}

// Per-thread buffers: one packed strip, the 8 lane sums of a tile, one row of tree sums.
inline size_t slot_floats (size_t k) { return k * kStripCols + 8 * size_t(kRows) * kStripCols + kStripCols; }

// Kept between calls: fresh pages cost a fault each (one call at a time per calling thread).
inline Scratch& call_scratch () {
  thread_local Scratch scratch;
  return scratch;
}

// The whole matmul. Work units are (strip, part of the row tiles) pairs, strip-major, so a thread
// packs each of its strips once; rows are split too only when there are fewer strips than threads.
template <class W, bool Fused>
void matmul (const float* x, size_t m, size_t k, const typename W::Code* w, size_t n, float* y, bool to_bf16,
             int threads) {
  if (m == 0 || n == 0) return;
  const size_t k8 = k - k % 8, steps = k8 / 8;
  const size_t tiles = (m + kRows - 1) / kRows;
  const size_t strips = (n + kStripCols - 1) / kStripCols;
  const size_t want = threads < 1 ? 1 : size_t(threads);
  size_t parts = strips >= want ? 1 : (want + strips - 1) / strips;
  if (parts > tiles) parts = tiles;
  const size_t units = strips * parts;
  const size_t chunks = want < units ? want : units;
  const size_t tile_floats = size_t(kRows) * k8, slot = slot_floats(k);
  Scratch& scratch = call_scratch();
  scratch.resize(tiles * tile_floats + chunks * slot);
  float* xp = scratch.data();
  // Packing x is a copy (nothing summed): split by tiles when large enough to pay for the threads.
  const int pack_threads = m * k >= kMinParallelWork / 4 ? threads : 1;
  parallel_ranges(tiles, 1, pack_threads, [&](size_t t0, size_t t1) {
    for (size_t t = t0; t < t1; t++) pack_x_tile(x, m, k, t * kRows, xp + t * tile_floats);
  });
  float* slots = xp + tiles * tile_floats;
  struct Call {
    const float* x; const float* xp; size_t m, k, steps; const typename W::Code* w; size_t n; float* y; bool to_bf16;
    size_t tiles, tile_floats, parts, units, chunks, slot; float* slots;
  } call{x, xp, m, k, steps, w, n, y, to_bf16, tiles, tile_floats, parts, units, chunks, slot, slots};
  parallel_ranges(chunks, 1, int(chunks), [&call](size_t h0, size_t h1) {
    for (size_t h = h0; h < h1; h++) {
      float* wp = call.slots + h * call.slot;
      float* part = wp + call.k * kStripCols;
      float* sums = part + 8 * size_t(kRows) * kStripCols;
      const size_t u0 = h * call.units / call.chunks, u1 = (h + 1) * call.units / call.chunks;
      size_t packed_strip = SIZE_MAX;
      for (size_t u = u0; u < u1; u++) {
        const size_t s = u / call.parts, p = u % call.parts;
        const size_t c0 = s * kStripCols;
        const size_t nc = call.n - c0 < kStripCols ? call.n - c0 : kStripCols;
        if (packed_strip != s) {
          pack_strip<W>(call.w, call.k, c0, nc, wp);
          packed_strip = s;
        }
        const size_t tile0 = p * call.tiles / call.parts, tile1 = (p + 1) * call.tiles / call.parts;
        for (size_t ti = tile0; ti < tile1; ti++) {
          const float* xt = call.xp + ti * call.tile_floats;
          const size_t row0 = ti * kRows;
          const size_t mr = call.m - row0 < size_t(kRows) ? call.m - row0 : size_t(kRows);
          for (size_t l = 0; l < 8; l++)
            lane_chain_rows<Fused>(mr, xt + l * call.steps * kRows, wp + l * call.steps * kStripCols, call.steps,
                                   part + l * size_t(kRows) * kStripCols);
          finish_tile<Fused>(part, call.x, row0, mr, call.k, wp, call.y, call.n, c0, nc, call.to_bf16, sums);
        }
      }
    }
  });
}

}  // namespace lanes
}  // namespace PDB_ISA_NS
}  // namespace pdb
