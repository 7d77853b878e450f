#include <cmath>

#include "dot_tile.h"
#include "isa_kernels.h"
#include "parallel.h"

namespace pdb {
namespace PDB_ISA_NS {

namespace {

// Queries share one pass over a chunk of entries: their q rows are contiguous, so the block is
// one [tb * heads, dim] matrix for the dot tiles.
constexpr size_t kQueryBlock = 8;
constexpr size_t kEntryChunk = 64;

inline float relu (float x) { return x <= 0.0f ? 0.0f : x; }

}  // namespace

void indexer_scores (const float* q, size_t t_count, size_t heads, size_t dim, const float* entries, size_t n_entries,
                     const float* weights, const int32_t* visible, float q_scale, float w_scale, float* out, int threads) {
  // Units (query block, part of the entries): few queries (decode) split the entries too, in whole
  // kEntryChunk runs, so each score is the same dot product whichever unit computes it. Round-robin
  // over the units: a causal prefill's later queries see more entries.
  const size_t blocks = (t_count + kQueryBlock - 1) / kQueryBlock;
  const size_t entry_chunks = (n_entries + kEntryChunk - 1) / kEntryChunk;
  const size_t want = threads < 1 ? 1 : size_t(threads);
  size_t parts = blocks == 0 || blocks >= want || entry_chunks == 0 ? 1 : (want + blocks - 1) / blocks;
  if (parts > entry_chunks && entry_chunks > 0) parts = entry_chunks;
  const size_t per = entry_chunks == 0 ? 0 : (entry_chunks + parts - 1) / parts * kEntryChunk;
  parallel_strided(blocks * parts, threads, [&](size_t first, size_t stride) {
    Scratch dots(kQueryBlock * heads * kEntryChunk), wq(kQueryBlock * heads);
    const F8 qs = f8_set1(q_scale);
    const F8 zero = f8_zero();
    for (size_t u = first; u < blocks * parts; u += stride) {
      const size_t t0 = (u / parts) * kQueryBlock, p = u % parts;
      const size_t lo = p * per < n_entries ? p * per : n_entries;
      const size_t hi = parts == 1 || lo + per > n_entries ? n_entries : lo + per;
      const size_t tb = t_count - t0 < kQueryBlock ? t_count - t0 : kQueryBlock;
      size_t vmax = 0;
      for (size_t tt = 0; tt < tb; tt++) if (size_t(visible[t0 + tt]) > vmax) vmax = size_t(visible[t0 + tt]);
      if (vmax > hi) vmax = hi;
      for (size_t i = 0; i < tb * heads; i++) wq[i] = weights[t0 * heads + i] * w_scale;
      for (size_t n0 = lo; n0 < vmax; n0 += kEntryChunk) {
        const size_t nb = vmax - n0 < kEntryChunk ? vmax - n0 : kEntryChunk;
        dot_columns<WeightF32, DotOrder::kLanes8>(q + t0 * heads * dim, tb * heads, dim, entries + n0 * dim,
                                                  dots.data(), kEntryChunk, false, 0, nb);
        for (size_t tt = 0; tt < tb; tt++) {
          const size_t vis = size_t(visible[t0 + tt]);
          const size_t end = n0 + nb < vis ? n0 + nb : vis;
          const float* dt = dots.data() + tt * heads * kEntryChunk;
          const float* w = wq.data() + tt * heads;
          float* o = out + (t0 + tt) * n_entries;
          size_t n = n0;
          for (; n + 8 <= end; n += 8) {
            F8 acc = f8_zero();
            for (size_t h = 0; h < heads; h++) {
              const F8 d = f8_load(dt + h * kEntryChunk + (n - n0));
              const F8 r = f8_blend(d, zero, f8_le(d, zero));
              acc = acc + f8_set1(w[h]) * (r * qs);
            }
            f8_store(o + n, canonical_nan8(acc));
          }
          for (; n < end; n++) {
            float acc = 0.0f;
            for (size_t h = 0; h < heads; h++) acc = acc + w[h] * (relu(dt[h * kEntryChunk + (n - n0)]) * q_scale);
            o[n] = finish_output(acc, false);
          }
        }
      }
      for (size_t tt = 0; tt < tb; tt++) {
        float* o = out + (t0 + tt) * n_entries;
        const size_t vis = size_t(visible[t0 + tt]);
        for (size_t n = vis > lo ? vis : lo; n < hi; n++) o[n] = -INFINITY;
      }
    }
  });
}

}  // namespace PDB_ISA_NS
}  // namespace pdb
