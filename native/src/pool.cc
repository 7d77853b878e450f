#include "fmath.h"
#include "isa_kernels.h"
#include "parallel.h"

namespace pdb {
namespace PDB_ISA_NS {

namespace {

// Channels per task: threads can split one window's channels (decode pools one window at a time).
constexpr size_t kChannelBlock = 64;

void pool8 (const float* kv, const float* gate, size_t rows, size_t d, const PoolOptions& o, float* e, float* y) {
  F8 m = f8_load(gate);
  for (size_t r = 1; r < rows; r++) {
    const F8 g = f8_load(gate + r * d);
    m = f8_blend(m, g, f8_gt(g, m));
  }
  F8 sum = f8_zero();
  for (size_t r = 0; r < rows; r++) {
    const F8 ex = exp8_f32(f8_load(gate + r * d) - m);
    f8_store(e + 8 * r, ex);
    sum = sum + ex;
  }
  F8 acc = f8_zero();
  for (size_t r = 0; r < rows; r++) {
    F8 p = f8_load(e + 8 * r) / sum;
    if (o.round_weights_bf16) p = round_bf16_8(p);
    F8 prod = p * f8_load(kv + r * d);
    if (o.round_products_bf16) prod = round_bf16_8(prod);
    acc = acc + prod;
  }
  f8_store(y, o.round_out_bf16 ? round_bf16_8(acc) : canonical_nan8(acc));
}

void pool1 (const float* kv, const float* gate, size_t rows, size_t d, const PoolOptions& o, float* e, float* y) {
  float m = gate[0];
  for (size_t r = 1; r < rows; r++) if (gate[r * d] > m) m = gate[r * d];
  float sum = 0.0f;
  for (size_t r = 0; r < rows; r++) {
    e[r] = exp_f32(gate[r * d] - m);
    sum = sum + e[r];
  }
  float acc = 0.0f;
  for (size_t r = 0; r < rows; r++) {
    float p = e[r] / sum;
    if (o.round_weights_bf16) p = round_bf16_nan_safe(p);
    float prod = p * kv[r * d];
    if (o.round_products_bf16) prod = round_bf16_nan_safe(prod);
    acc = acc + prod;
  }
  *y = finish_output(acc, o.round_out_bf16);
}

}  // namespace

void softmax_pool (const float* kv, const float* gate, size_t windows, size_t rows, size_t d, PoolOptions opts,
                   float* y, int threads) {
  if (windows == 0 || d == 0) return;
  const size_t blocks = (d + kChannelBlock - 1) / kChannelBlock;
  parallel_ranges(windows * blocks, 1, threads, [&](size_t task0, size_t task1) {
    Scratch e(8 * rows);
    for (size_t task = task0; task < task1; task++) {
      const size_t w = task / blocks;
      const size_t c0 = (task % blocks) * kChannelBlock;
      const size_t c1 = c0 + kChannelBlock < d ? c0 + kChannelBlock : d;
      const size_t base = w * rows * d;
      size_t c = c0;
      for (; c + 8 <= c1; c += 8) pool8(kv + base + c, gate + base + c, rows, d, opts, e.data(), y + w * d + c);
      for (; c < c1; c++) pool1(kv + base + c, gate + base + c, rows, d, opts, e.data(), y + w * d + c);
    }
  });
}

}  // namespace PDB_ISA_NS
}  // namespace pdb
