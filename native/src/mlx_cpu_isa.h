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

// Weights come in column strips of kMlxUnitColumns (src/kernels/mlx-cpu.ts stripMajor): strip s
// (columns 64s … 64s + w - 1, w = 64 but for the last) starts at 64s * rows and holds [rows, w],
// so a unit streams its weights contiguously instead of one 256-byte piece per n-float row.

// Set in MlxMxArgs/MlxAffineArgs::rounding (beside the kMlxRound* bits) when no operand (x, the
// weights, the scales) holds a NaN with bits 16-21 all set (the weights and scales are scanned
// once, when prepared: mlx_scan_weights, mlx_cpu.h; x by every call). Then every NaN that can reach a bf16
// rounding is the hardware's default NaN, an operand's NaN quieted (bit 22 set, bits 16-22 not all
// set), or one already rounded (low half zero), and the unchecked rounding (b + 0x7fff + lsb, low
// half cleared) leaves each a NaN: the carry out of the low half cannot reach the exponent. The
// outputs are stored with every NaN made the positive quiet NaN, so the bits equal the checked
// rounding's; the flag only drops the per-rounding NaN check.
constexpr int kMlxOperandsNanSafe = 8;

// Set as well (with kMlxOperandsNanSafe and every rounding point bf16, MLX_CPU) when the CPU runs
// AVX512_BF16 and the operands' smallest nonzero magnitudes prove that no product, scaled group
// sum or partial sum can be denormal (mlx_cpu.cc, bf16_proof): then vcvtne2ps2bf16, which treats a
// denormal input as zero but rounds every normal value, zero and infinity to nearest even as the
// integer rounding does (and keeps a NaN a NaN), does the roundings, two vectors at a time.
constexpr int kMlxOperandsNormal = 16;

// One pass over an operand: whether it holds no NaN that could carry (above), and a lower bound
// on log2 of its smallest nonzero magnitude (NaNs and infinities aside; a denormal counts as
// 2^-149; kMlxNoNonzero when every value is zero, NaN or infinite).
constexpr int kMlxNoNonzero = 1000;
struct MlxScan {
  bool nan_safe;
  int min_exponent;
};

struct MlxMxArgs {
  const float* x;
  size_t k, n;
  const float* wt;  // decoded e4m3 values, [k, n] in column strips (below)
  const float* st;  // scales, [k/32, n] in column strips
  int rounding;     // kMlxRound* bits
  float* out;
};

struct MlxAffineArgs {
  const float* x;
  size_t k, n;
  const float* wt;  // dequantized values, [k, n] in column strips
  int rounding;
  float* out;
};

struct MlxCpuIsaKernels {
  const char* name;
  void (*mxfp8_units)(const MlxMxArgs&, size_t m, size_t unit_begin, size_t unit_end);
  void (*affine_units)(const MlxAffineArgs&, size_t m, size_t unit_begin, size_t unit_end);
  // p[0, count) scanned (MlxScan).
  MlxScan (*scan)(const float* p, size_t count);
  // The same units on the vcvtne2ps2bf16 roundings (kMlxOperandsNormal, every rounding point set);
  // null but in the AVX-512 build.
  void (*mxfp8_units_bf16)(const MlxMxArgs&, size_t m, size_t unit_begin, size_t unit_end);
  void (*affine_units_bf16)(const MlxAffineArgs&, size_t m, size_t unit_begin, size_t unit_end);
};

namespace portable { extern const MlxCpuIsaKernels kMlxCpuKernels; }
#if defined(PDB_HAVE_AVX2)
namespace avx2 { extern const MlxCpuIsaKernels kMlxCpuKernels; }
namespace avx512 { extern const MlxCpuIsaKernels kMlxCpuKernels; }
#endif

}  // namespace pdb
