// The matmul in the 'sequential-fma' order (docs/kernels.md, "The fourth order"): every output is
// one chain of fused multiply-adds over k in increasing index, s = fma(x[i], w[i], s) from s = +0,
// then finish_output. Nothing else is added to anything, so the bits depend on no tiling, m or
// thread count.
//
// Because each output has one chain, the kernel vectorizes across OUTPUTS: a lane holds one
// output column, and one broadcast x value feeds 16 columns at once. W is packed per block of
// kBlockK k-values and kPanel columns into strips of 16 columns, k-major (strip s, step i at
// bp + (s * kc + i) * 16), bf16 widened exactly, columns past the range zero. A tile of MR rows
// of x by NS strips keeps MR x NS x 2 accumulators in registers; between k blocks a tile's sums
// wait in y itself (or a per-thread edge buffer for a last strip narrower than 16): storing a
// float32 and loading it back changes nothing.
//
// W may also come packed once, ahead of time, in the same strip layout over the whole k (strip s,
// step i at wp + (s * k + i) * 16, codes kept: bf16 stays bf16; pack_strips_whole, MatmulOrder
// kSequentialFmaPacked): the tiles then read it where it lies. Decode (m = 1) would otherwise pay
// the transposes of the packing on every call, which cost more than its multiply-adds.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernel_order.h"
#include "parallel.h"

namespace pdb {
namespace PDB_ISA_NS {
namespace seq {

constexpr size_t kStrip = 16;     // output columns per packed strip (two F8)
constexpr int kRows = 6;          // x rows per full tile: 6 x 2 = 12 accumulators, 2 W loads, 1 broadcast
constexpr size_t kBlockK = 256;   // k per packed block
constexpr size_t kPanel = 192;    // columns per packed block: kBlockK x kPanel floats = 192 KiB, in L2

// W rows [c0, c0 + nc) of the range ending at c1, k in [k0, k0 + kc), packed into strips.
template <class W>
inline void pack_strips (const typename W::Code* w, size_t k, size_t c0, size_t nc, size_t k0, size_t kc, float* bp) {
  const size_t strips = (nc + kStrip - 1) / kStrip;
  const size_t kc8 = kc - kc % 8;
  for (size_t s = 0; s < strips; s++) {
    float* d = bp + s * kc * kStrip;
    for (size_t h = 0; h < kStrip; h += 8) {
      const size_t r0 = s * kStrip + h;
      const size_t valid = r0 >= nc ? 0 : (nc - r0 < 8 ? nc - r0 : 8);
      if (valid == 8) {
        const typename W::Code* src[8];
        for (int q = 0; q < 8; q++) src[q] = w + (c0 + r0 + q) * k + k0;
        for (size_t i = 0; i < kc8; i += 8) {
          F8 t[8];
          for (int q = 0; q < 8; q++) t[q] = W::load8(src[q] + i);
          f8_transpose8(t);
          for (int u = 0; u < 8; u++) f8_store(d + (i + u) * kStrip + h, t[u]);
        }
        for (size_t i = kc8; i < kc; i++)
          for (int q = 0; q < 8; q++) d[i * kStrip + h + q] = W::load1(src[q] + i);
      } else {
        for (size_t i = 0; i < kc; i++)
          for (size_t q = 0; q < 8; q++) d[i * kStrip + h + q] = q < valid ? W::load1(w + (c0 + r0 + q) * k + k0 + i) : 0.0f;
      }
    }
  }
}

// MR rows of x (ldx apart, from the block's first k) by NS strips (`stride` codes apart) over kc
// steps: c[r * ldc + 16 s + q] continues its chain (starts from +0 when `first`). B is WeightF32 for
// a block packed on the fly, or the weight's own storage for W packed ahead of time.
template <class B, int MR, int NS>
inline void tile (const float* x, size_t ldx, const typename B::Code* bp, size_t stride, size_t kc, float* c, size_t ldc,
                  bool first) {
  F8 acc[MR][NS][2];
  for (int r = 0; r < MR; r++)
    for (int s = 0; s < NS; s++)
      for (int h = 0; h < 2; h++) acc[r][s][h] = first ? f8_zero() : f8_load(c + r * ldc + s * kStrip + h * 8);
  for (size_t i = 0; i < kc; i++) {
    F8 b[NS][2];
    for (int s = 0; s < NS; s++)
      for (int h = 0; h < 2; h++) b[s][h] = B::load8(bp + s * stride + i * kStrip + h * 8);
    for (int r = 0; r < MR; r++) {
      const F8 a = f8_set1(x[r * ldx + i]);
      for (int s = 0; s < NS; s++)
        for (int h = 0; h < 2; h++) acc[r][s][h] = f8_fma(a, b[s][h], acc[r][s][h]);
    }
  }
  for (int r = 0; r < MR; r++)
    for (int s = 0; s < NS; s++)
      for (int h = 0; h < 2; h++) f8_store(c + r * ldc + s * kStrip + h * 8, acc[r][s][h]);
}

// Strips side by side for MR rows: enough independent chains to hide the FMA latency (8 to 12).
template <int MR> constexpr int strips_per_tile () { return MR == 1 ? 4 : MR == 2 ? 3 : MR == 3 ? 2 : 1; }

// MR rows over `full` whole strips (in y, ldc = n) in groups of strips_per_tile<MR>.
template <class B, int MR>
inline void row_block (const float* x, size_t ldx, const typename B::Code* bp, size_t stride, size_t kc, float* c,
                       size_t ldc, size_t full, bool first) {
  constexpr int NS = strips_per_tile<MR>();
  size_t s = 0;
  for (; s + NS <= full; s += NS) tile<B, MR, NS>(x, ldx, bp + s * stride, stride, kc, c + s * kStrip, ldc, first);
  for (; s < full; s++) tile<B, MR, 1>(x, ldx, bp + s * stride, stride, kc, c + s * kStrip, ldc, first);
}

template <class B>
inline void rows_any (size_t mr, const float* x, size_t ldx, const typename B::Code* bp, size_t stride, size_t kc,
                      float* c, size_t ldc, size_t full, bool first) {
  switch (mr) {
    case 1: return row_block<B, 1>(x, ldx, bp, stride, kc, c, ldc, full, first);
    case 2: return row_block<B, 2>(x, ldx, bp, stride, kc, c, ldc, full, first);
    case 3: return row_block<B, 3>(x, ldx, bp, stride, kc, c, ldc, full, first);
    case 4: return row_block<B, 4>(x, ldx, bp, stride, kc, c, ldc, full, first);
    case 5: return row_block<B, 5>(x, ldx, bp, stride, kc, c, ldc, full, first);
    default: return row_block<B, kRows>(x, ldx, bp, stride, kc, c, ldc, full, first);
  }
}

// What one thread needs: its packed W block and the sums of a last, narrower strip (m x 16).
struct Workspace {
  float* bp;
  float* edge;
};

// y rows [0, m), columns [j0, j1) (j0 a multiple of 16), W row-major (`packed` false: each block is
// packed into ws.bp) or already in strips over the whole k (`packed` true).
template <class W>
void columns (const float* x, size_t m, size_t k, const typename W::Code* w, size_t n, float* y, bool to_bf16,
              size_t j0, size_t j1, Workspace ws, bool packed) {
  for (size_t c0 = j0; c0 < j1; c0 += kPanel) {
    const size_t nc = j1 - c0 < kPanel ? j1 - c0 : kPanel;
    const size_t full = nc / kStrip, rest = nc % kStrip;
    if (k == 0) {
      for (size_t r = 0; r < m; r++)
        for (size_t c = 0; c < nc; c++) y[r * n + c0 + c] = finish_output(0.0f, to_bf16);
      continue;
    }
    for (size_t k0 = 0; k0 < k; k0 += kBlockK) {
      const size_t kc = k - k0 < kBlockK ? k - k0 : kBlockK;
      if (!packed) pack_strips<W>(w, k, c0, nc, k0, kc, ws.bp);
      for (size_t i0 = 0; i0 < m; i0 += kRows) {
        const size_t mr = m - i0 < size_t(kRows) ? m - i0 : size_t(kRows);
        const float* xr = x + i0 * k + k0;
        if (packed) {
          const typename W::Code* bp = w + (c0 / kStrip) * k * kStrip + k0 * kStrip;
          rows_any<W>(mr, xr, k, bp, k * kStrip, kc, y + i0 * n + c0, n, full, k0 == 0);
          if (rest > 0) rows_any<W>(mr, xr, k, bp + full * k * kStrip, k * kStrip, kc, ws.edge + i0 * kStrip, kStrip, 1, k0 == 0);
        }
        else {
          rows_any<WeightF32>(mr, xr, k, ws.bp, kc * kStrip, kc, y + i0 * n + c0, n, full, k0 == 0);
          if (rest > 0) rows_any<WeightF32>(mr, xr, k, ws.bp + full * kc * kStrip, kc * kStrip, kc, ws.edge + i0 * kStrip, kStrip, 1, k0 == 0);
        }
      }
    }
    for (size_t r = 0; r < m; r++) {
      float* yr = y + r * n + c0;
      for (size_t c = 0; c < full * kStrip; c++) yr[c] = finish_output(yr[c], to_bf16);
      for (size_t c = 0; c < rest; c++) yr[full * kStrip + c] = finish_output(ws.edge[r * kStrip + c], to_bf16);
    }
  }
}

// Kept between calls: fresh pages cost a fault each (one call at a time per calling thread).
inline Scratch& call_scratch () {
  thread_local Scratch scratch;
  return scratch;
}

// The whole matmul: one column range per thread, split in multiples of 16.
template <class W>
void matmul (const float* x, size_t m, size_t k, const typename W::Code* w, size_t n, float* y, bool to_bf16,
             int threads, bool packed) {
  if (m == 0 || n == 0) return;
  const size_t groups = (n + kStrip - 1) / kStrip;
  const size_t chunks = threads < 1 ? 1 : (size_t(threads) < groups ? size_t(threads) : groups);
  const size_t per_thread = kBlockK * kPanel + m * kStrip;
  Scratch& scratch = call_scratch();
  scratch.resize(chunks * per_thread);
  struct Call {
    const float* x; size_t m, k; const typename W::Code* w; size_t n; float* y; bool to_bf16;
    size_t groups, chunks, per_thread; float* slots; bool packed;
  } call{x, m, k, w, n, y, to_bf16, groups, chunks, per_thread, scratch.data(), packed};
  // Chunk t owns columns [16 * (t * groups / chunks), 16 * ((t + 1) * groups / chunks)), cut at n.
  parallel_ranges(chunks, 1, int(chunks), [&call](size_t t0, size_t t1) {
    for (size_t t = t0; t < t1; t++) {
      const size_t j0 = kStrip * (t * call.groups / call.chunks);
      size_t j1 = kStrip * ((t + 1) * call.groups / call.chunks);
      if (j1 > call.n) j1 = call.n;
      float* slot = call.slots + t * call.per_thread;
      columns<W>(call.x, call.m, call.k, call.w, call.n, call.y, call.to_bf16, j0, j1, Workspace{slot, slot + kBlockK * kPanel}, call.packed);
    }
  });
}

}  // namespace seq
}  // namespace PDB_ISA_NS
}  // namespace pdb
