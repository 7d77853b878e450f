// The kernels one ISA variant provides (simd8.h: pdb::avx2 or pdb::portable). Each has the same
// signature as its dispatched namesake in namespace pdb (matmul.h, rmsnorm.h, ...); isa_table.cc
// collects them into that ISA's KernelTable (isa.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "attention.h"
#include "fmath_array.h"
#include "matmul.h"
#include "pool.h"
#include "simd8.h"

namespace pdb {
namespace PDB_ISA_NS {

void matmul_f32 (const float* x, size_t m, size_t k, const float* w, size_t n, float* y,
                 bool round_bf16, MatmulOrder order, int threads);
void matmul_bf16 (const float* x, size_t m, size_t k, const uint16_t* w, size_t n, float* y,
                  bool round_bf16, MatmulOrder order, int threads);
void rms_norm (const float* x, size_t rows, size_t d, const float* weight, float eps, float* y, int threads);
void fmath_array (FmathFn fn, const float* x, size_t n, float* y, int threads);
void attention_mqa (const float* q, size_t t_count, size_t heads, size_t dim, const float* kv, size_t n,
                    const int32_t* offsets, const int32_t* keys, const float* sinks, float scale,
                    AttentionOptions opts, float* out, int threads);
void indexer_scores (const float* q, size_t t_count, size_t heads, size_t dim, const float* entries, size_t n_entries,
                     const float* weights, const int32_t* visible, float q_scale, float w_scale, float* out, int threads);
void softmax_pool (const float* kv, const float* gate, size_t windows, size_t rows, size_t d, PoolOptions opts,
                   float* y, int threads);
void rope_rows (float* x, size_t rows, size_t heads, size_t head_dim, size_t offset, size_t rope_dim,
                const float* cos, const float* sin, const int32_t* table_rows, bool inverse, int threads);
void round_bf16_array (float* x, size_t n, int threads);
float peak_mul_add_loop (size_t iterations, float scale, float step);
void peak_copy (float* dst, const float* src, size_t begin, size_t end, int repeats);

}  // namespace PDB_ISA_NS
}  // namespace pdb
