// The mlx-cpu quantized matmuls' vector loops, compiled once per ISA (mlx_cpu_isa.cc, like the
// kernels of isa_kernels.h) and chosen by mlx_cpu.cc. The outputs [m, n] are split into units of
// kMlxUnitRows rows by kMlxUnitColumns columns (the same for every ISA, so the thread split is
// too); each function computes units [unit_begin, unit_end). A lane is one output, whose chain of
// bf16 roundings runs in k order exactly as the scalar reference's, so neither the lane count nor
// the split can change a bit.
#pragma once

#include <cstddef>

namespace pdb {

constexpr size_t kMlxUnitRows = 4;
constexpr size_t kMlxUnitColumns = 64;

struct MlxMxArgs {
  const float* x;
  size_t k, n;
  const float* wt;  // [k, n] decoded e4m3 values
  const float* st;  // [k/32, n] scales
  int rounding;     // kMlxRound* bits
  float* out;
};

struct MlxAffineArgs {
  const float* x;
  size_t k, n;
  const float* wt;  // [k, n] dequantized values
  int rounding;
  float* out;
};

struct MlxCpuIsaKernels {
  const char* name;
  void (*mxfp8_units)(const MlxMxArgs&, size_t m, size_t unit_begin, size_t unit_end);
  void (*affine_units)(const MlxAffineArgs&, size_t m, size_t unit_begin, size_t unit_end);
};

namespace portable { extern const MlxCpuIsaKernels kMlxCpuKernels; }
#if defined(PDB_HAVE_AVX2)
namespace avx2 { extern const MlxCpuIsaKernels kMlxCpuKernels; }
namespace avx512 { extern const MlxCpuIsaKernels kMlxCpuKernels; }
#endif

}  // namespace pdb
