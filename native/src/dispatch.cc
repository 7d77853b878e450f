// The kernels' public functions (matmul.h, rmsnorm.h, ...): each calls the active ISA's table
// (isa.h). Compiled once, without ISA flags.
#include <atomic>
#include <cstdlib>

#include "attention.h"
#include "fmath_array.h"
#include "indexer.h"
#include "isa.h"
#include "matmul.h"
#include "pool.h"
#include "rmsnorm.h"
#include "rope_rows.h"
#include "round_bf16.h"

namespace pdb {

namespace {

const KernelTable* g_active = nullptr;

const KernelTable& automatic () {
#if defined(PDB_HAVE_AVX2)
  if (avx512_usable()) return avx512::kKernelTable;
  if (avx2_usable()) return avx2::kKernelTable;
#endif
  return portable::kKernelTable;
}

}  // namespace

bool avx2_usable () {
#if defined(PDB_HAVE_AVX2) && (defined(__x86_64__) || defined(__i386__))
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

bool avx512_usable () {
#if defined(PDB_HAVE_AVX2) && (defined(__x86_64__) || defined(__i386__))
  // libgcc's CPU model also checks that the OS saves the 512-bit state (XCR0).
  return avx2_usable() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
#else
  return false;
#endif
}

bool select_kernel_isa (const std::string& request, std::string* error) {
  if (request.empty()) {
    g_active = &automatic();
    return true;
  }
  if (request == "portable") {
    g_active = &portable::kKernelTable;
    return true;
  }
  if (request == "avx2") {
#if defined(PDB_HAVE_AVX2)
    if (avx2_usable()) {
      g_active = &avx2::kKernelTable;
      return true;
    }
    *error = "PD_KERNELS_ISA=avx2, but this CPU lacks AVX2, F16C or FMA (use PD_KERNELS_ISA=portable, or leave it unset)";
#else
    *error = "PD_KERNELS_ISA=avx2, but this build has no AVX2 kernels (not an x86 build; use portable, or leave it unset)";
#endif
    return false;
  }
  if (request == "avx512") {
#if defined(PDB_HAVE_AVX2)
    if (avx512_usable()) {
      g_active = &avx512::kKernelTable;
      return true;
    }
    *error = "PD_KERNELS_ISA=avx512, but this CPU lacks AVX-512 F/DQ/BW/VL (or AVX2, F16C, FMA) (use avx2 or portable, or leave it unset)";
#else
    *error = "PD_KERNELS_ISA=avx512, but this build has no AVX-512 kernels (not an x86 build; use portable, or leave it unset)";
#endif
    return false;
  }
  *error = "PD_KERNELS_ISA=" + request + " is not a kernel ISA (expected avx512, avx2 or portable, or unset)";
  return false;
}

const KernelTable& kernels () {
  if (g_active == nullptr) g_active = &automatic();
  return *g_active;
}

namespace {
std::atomic<bool> g_matmul_legacy{false};
std::atomic<bool> g_matmul_decode_tile{true};
std::atomic<bool> g_matmul_exact_fma{true};
}  // namespace

bool matmul_legacy_tiles () { return g_matmul_legacy.load(std::memory_order_relaxed); }
void set_matmul_legacy_tiles (bool on) { g_matmul_legacy.store(on, std::memory_order_relaxed); }
bool matmul_decode_tile () { return g_matmul_decode_tile.load(std::memory_order_relaxed); }
void set_matmul_decode_tile (bool on) { g_matmul_decode_tile.store(on, std::memory_order_relaxed); }
bool matmul_exact_fma () { return g_matmul_exact_fma.load(std::memory_order_relaxed); }
void set_matmul_exact_fma (bool on) { g_matmul_exact_fma.store(on, std::memory_order_relaxed); }

void matmul_f32 (const float* x, size_t m, size_t k, const float* w, size_t n, float* y,
                 bool round_bf16, MatmulOrder order, int threads) {
  kernels().matmul_f32(x, m, k, w, n, y, round_bf16, order, threads);
}

void matmul_bf16 (const float* x, size_t m, size_t k, const uint16_t* w, size_t n, float* y,
                  bool round_bf16, MatmulOrder order, int threads) {
  kernels().matmul_bf16(x, m, k, w, n, y, round_bf16, order, threads);
}

void rms_norm (const float* x, size_t rows, size_t d, const float* weight, float eps, float* y, int threads) {
  kernels().rms_norm(x, rows, d, weight, eps, y, threads);
}

void fmath_array (FmathFn fn, const float* x, size_t n, float* y, int threads) {
  kernels().fmath_array(fn, x, n, y, threads);
}

void attention_mqa (const float* q, size_t t_count, size_t heads, size_t dim, const float* kv, size_t n,
                    const int32_t* offsets, const int32_t* keys, const float* sinks, float scale,
                    AttentionOptions opts, float* out, int threads) {
  kernels().attention_mqa(q, t_count, heads, dim, kv, n, offsets, keys, sinks, scale, opts, out, threads);
}

void indexer_scores (const float* q, size_t t_count, size_t heads, size_t dim, const float* entries, size_t n_entries,
                     const float* weights, const int32_t* visible, float q_scale, float w_scale, float* out, int threads) {
  kernels().indexer_scores(q, t_count, heads, dim, entries, n_entries, weights, visible, q_scale, w_scale, out, threads);
}

void softmax_pool (const float* kv, const float* gate, size_t windows, size_t rows, size_t d, PoolOptions opts,
                   float* y, int threads) {
  kernels().softmax_pool(kv, gate, windows, rows, d, opts, y, threads);
}

void rope_rows (float* x, size_t rows, size_t heads, size_t head_dim, size_t offset, size_t rope_dim,
                const float* cos, const float* sin, const int32_t* table_rows, bool inverse, int threads) {
  kernels().rope_rows(x, rows, heads, head_dim, offset, rope_dim, cos, sin, table_rows, inverse, threads);
}

void round_bf16_array (float* x, size_t n, int threads) { kernels().round_bf16_array(x, n, threads); }

}  // namespace pdb
