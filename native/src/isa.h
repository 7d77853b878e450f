// Which kernel variant runs (docs/kernels.md, "Portable build and ISA dispatch"). The vector kernels
// are compiled once per ISA (simd8.h); each variant fills a KernelTable, and the functions of
// matmul.h, rmsnorm.h, ... (dispatch.cc) call the table chosen once, at addon load:
//   PD_KERNELS_ISA=avx512    AVX-512 matmul tiles, AVX2 elsewhere (refused when the CPU lacks AVX-512 F/DQ/BW/VL)
//   PD_KERNELS_ISA=avx2      AVX2 (refused when the CPU lacks AVX2, F16C or FMA, or the build has no AVX2 variant)
//   PD_KERNELS_ISA=portable  the plain C++ variant
//   unset or empty           the first of avx512, avx2 this CPU runs, else portable
// Every variant gives the same bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "attention.h"
#include "fmath_array.h"
#include "matmul.h"
#include "pool.h"

namespace pdb {

struct KernelTable {
  const char* name;  // "avx2" or "portable"
  void (*matmul_f32)(const float*, size_t, size_t, const float*, size_t, float*, bool, MatmulOrder, int);
  void (*matmul_bf16)(const float*, size_t, size_t, const uint16_t*, size_t, float*, bool, MatmulOrder, int);
  void (*rms_norm)(const float*, size_t, size_t, const float*, float, float*, int);
  void (*fmath_array)(FmathFn, const float*, size_t, float*, int);
  void (*attention_mqa)(const float*, size_t, size_t, size_t, const float*, size_t, const int32_t*, const int32_t*,
                        const float*, float, AttentionOptions, float*, int);
  void (*indexer_scores)(const float*, size_t, size_t, size_t, const float*, size_t, const float*, const int32_t*,
                         float, float, float*, int);
  void (*softmax_pool)(const float*, const float*, size_t, size_t, size_t, PoolOptions, float*, int);
  void (*rope_rows)(float*, size_t, size_t, size_t, size_t, size_t, const float*, const float*, const int32_t*, bool, int);
  void (*round_bf16_array)(float*, size_t, int);
  float (*peak_mul_add_loop)(size_t, float, float);
  void (*peak_copy)(float*, const float*, size_t, size_t, int);
};

namespace portable { extern const KernelTable kKernelTable; }
#if defined(PDB_HAVE_AVX2)
namespace avx2 { extern const KernelTable kKernelTable; }
namespace avx512 { extern const KernelTable kKernelTable; }
#endif

// True when the AVX2 variant is compiled in and this CPU runs it (AVX2, F16C and FMA).
bool avx2_usable ();
// True when the AVX-512 variant is compiled in and this CPU runs it (avx2_usable, AVX-512 F/DQ/BW/VL).
bool avx512_usable ();

// Choose the variant for `request` ("" = automatic, "avx2", "portable"). False, with `error` set and
// the choice unchanged, when the request is unknown or cannot run here.
bool select_kernel_isa (const std::string& request, std::string* error);

// The active variant (chosen automatically on first use if select_kernel_isa was never called).
const KernelTable& kernels ();

}  // namespace pdb
