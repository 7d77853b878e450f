// The mlx-cpu quantized matmuls' vector loops (mlx_cpu_isa.h), compiled once per ISA. A lane is
// one output column: the chain of one output (products and partial sums each rounded to bf16 in
// k order, MLX's CPU rule, mlx_cpu.h) is the scalar reference's, element-wise, so 4, 8 or 16 lanes
// give the same bits. Speed comes from the lanes and from register tiles of 4 rows x 1-2 vectors
// that share each weight load; there is nothing to reassociate inside an output.
//
// GCC/Clang vector extensions (element-wise IEEE float32 ops; -ffp-contract=off keeps a * b + c
// unfused), so the one source is 16 lanes in the AVX-512 build, 8 in AVX2, 4 in the portable one.
// Like every ISA-compiled file, everything here lives in pdb::PDB_ISA_NS (simd8.h says why).
#include "mlx_cpu_isa.h"

#include "mlx_cpu.h"
#include "simd8.h"

namespace pdb {
namespace PDB_ISA_NS {
namespace {

#if defined(PDB_ISA_AVX512)
constexpr int kLanes = 16;
#elif defined(PDB_ISA_AVX2)
constexpr int kLanes = 8;
#else
constexpr int kLanes = 4;
#endif

typedef float VF __attribute__((vector_size(kLanes * 4)));
typedef uint32_t VU __attribute__((vector_size(kLanes * 4)));
typedef int32_t VI __attribute__((vector_size(kLanes * 4)));

// Rows per register tile, and vectors of columns per tile: the mxfp8 tile holds a group sum and a
// running sum per output, so it takes two vectors only where there are 32 registers.
constexpr int kRows = int(kMlxUnitRows);
static_assert(kMlxUnitColumns % (2 * kLanes) == 0, "a unit holds whole tiles");
constexpr int kAffineVectors = 2;
constexpr int kMxVectors = kLanes == 16 ? 2 : 1;

PDB_INLINE VF load (const float* p) {
  VF v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

PDB_INLINE void store (float* p, VF v) {
  std::memcpy(p, &v, sizeof v);
}

// bf16(v) per lane without the NaN check: nearest even on the upper 16 bits, (b + 0x7fff + lsb) with
// the low half cleared. Right for every non-NaN v, and for a NaN whose payload cannot carry into
// the sign (mlx_cpu_isa.h, kMlxOperandsNanSafe, says which NaNs can reach a rounding).
PDB_INLINE VF round_bf16_quiet (VF v) {
#if defined(PDB_ISA_AVX512)
  // The same sum in three ops: the lsb picks 0x8000 over 0x7fff by a mask (2-3 fewer ops than shift/and/add).
  const __m512i b = (__m512i)v;
  const __mmask16 odd = _mm512_test_epi32_mask(b, _mm512_set1_epi32(0x10000));
  const __m512i t = _mm512_mask_add_epi32(_mm512_add_epi32(b, _mm512_set1_epi32(0x7fff)), odd, b, _mm512_set1_epi32(0x8000));
  return (VF)_mm512_and_si512(t, _mm512_set1_epi32(int(0xffff0000u)));
#else
  const VU b = (VU)v;
  return (VF)((b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u);
#endif
}

// bf16(v) per lane: the same, and a NaN becomes the positive quiet NaN (a NaN with a large payload
// would otherwise carry into the sign and round to -0, or one with a payload only in the low half
// would round to inf).
PDB_INLINE VF round_bf16 (VF v) {
#if defined(PDB_ISA_AVX512)
  const __mmask16 nan = _mm512_cmp_ps_mask((__m512)v, (__m512)v, _CMP_UNORD_Q);
  return (VF)_mm512_mask_mov_ps((__m512)round_bf16_quiet(v), nan, _mm512_castsi512_ps(_mm512_set1_epi32(0x7fc00000)));
#else
  const VU nan = (VU)(v != v);
  return (VF)(((VU)round_bf16_quiet(v) & ~nan) | (nan & 0x7fc00000u));
#endif
}

PDB_INLINE float round_bf16 (float v) {
  const uint32_t b = float_bits(v);
  const uint32_t r = (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
  return bits_float((b & 0x7fffffffu) > 0x7f800000u ? 0x7fc00000u : r);
}

// An output as the references store it: any NaN is the positive quiet NaN.
PDB_INLINE VF stored (VF v) {
  const VU nan = (VU)(v != v);
  return (VF)(((VU)v & ~nan) | (nan & 0x7fc00000u));
}

PDB_INLINE float stored (float v) {
  return v != v ? bits_float(0x7fc00000u) : v;
}

// A product's or scaled group sum's rounding. Q: the operands hold no NaN that can carry
// (kMlxOperandsNanSafe), so every NaN reaching a rounding rounds to a NaN unchecked.
template <bool B, bool Q, class T>
PDB_INLINE T to (T v) {
  if constexpr (!B) {
    return v;
  } else if constexpr (Q) {
    return round_bf16_quiet(v);
  } else {
    return round_bf16(v);
  }
}

// A running sum's rounding. When its addends were rounded (`addends_rounded`) or the operands are
// NaN-safe, every NaN the sum can be is the hardware's, a rounded one or an operand's that cannot
// carry, so the unchecked rounding gives a NaN wherever the checked one does.
template <bool B, bool addends_rounded>
PDB_INLINE VF to_sum (VF v) {
  return B ? (addends_rounded ? round_bf16_quiet(v) : round_bf16(v)) : v;
}

// ---- affine: one running sum over k per output ----

// A unit's columns [j0, j1) lie in one strip (mlx_cpu_isa.h): column j of row i of the weight is at
// strip(j0)[i * ld + j - j0], ld the strip's width.
PDB_INLINE const float* strip (const float* w, size_t rows_per_column, size_t j0) {
  return w + j0 * rows_per_column;
}

PDB_INLINE size_t strip_width (size_t n, size_t j0) {
  const size_t s = j0 - j0 % kMlxUnitColumns;
  return n - s < kMlxUnitColumns ? n - s : kMlxUnitColumns;
}

template <int R, int V, bool P, bool S, bool Q>
PDB_INLINE void affine_tile (const MlxAffineArgs& a, size_t r0, size_t j0) {
  const size_t s0 = j0 - j0 % kMlxUnitColumns, ld = strip_width(a.n, j0);
  const float* ws = strip(a.wt, a.k, s0) + (j0 - s0);
  VF acc[R][V];
  for (int r = 0; r < R; r++) for (int v = 0; v < V; v++) acc[r][v] = VF{};
  const float* xr = a.x + r0 * a.k;
  for (size_t i = 0; i < a.k; i++) {
    VF w[V];
    for (int v = 0; v < V; v++) w[v] = load(ws + i * ld + size_t(v) * kLanes);
    for (int r = 0; r < R; r++) {
      const float xi = xr[size_t(r) * a.k + i];
      for (int v = 0; v < V; v++) acc[r][v] = to_sum<S, P || Q>(acc[r][v] + to<P, Q>(xi * w[v]));
    }
  }
  for (int r = 0; r < R; r++) {
    for (int v = 0; v < V; v++) store(a.out + (r0 + r) * a.n + j0 + size_t(v) * kLanes, stored(acc[r][v]));
  }
}

template <bool P, bool S, bool Q>
void affine_column (const MlxAffineArgs& a, size_t r, size_t j) {
  const size_t s0 = j - j % kMlxUnitColumns, ld = strip_width(a.n, j);
  const float* ws = strip(a.wt, a.k, s0) + (j - s0);
  const float* xr = a.x + r * a.k;
  float sum = 0.0f;
  for (size_t i = 0; i < a.k; i++) sum = to<S, false>(sum + to<P, false>(xr[i] * ws[i * ld]));
  a.out[r * a.n + j] = stored(sum);
}

// Rows [r0, r0 + R) by columns [j0, j1): whole tiles, then single vectors, then single columns.
template <int R, bool P, bool S, bool Q>
void affine_block (const MlxAffineArgs& a, size_t r0, size_t j0, size_t j1) {
  size_t j = j0;
  for (; j + kAffineVectors * kLanes <= j1; j += kAffineVectors * kLanes) affine_tile<R, kAffineVectors, P, S, Q>(a, r0, j);
  for (; j + kLanes <= j1; j += kLanes) affine_tile<R, 1, P, S, Q>(a, r0, j);
  for (; j < j1; j++) for (int r = 0; r < R; r++) affine_column<P, S, Q>(a, r0 + r, j);
}

// ---- mxfp8: per group of 32 a group sum, scaled into a running sum ----

template <int R, int V, bool P, bool S, bool C, bool Q>
PDB_INLINE void mx_tile (const MlxMxArgs& a, size_t r0, size_t j0) {
  const size_t s0 = j0 - j0 % kMlxUnitColumns, ld = strip_width(a.n, j0);
  const float* ws = strip(a.wt, a.k, s0) + (j0 - s0);
  const float* ss = strip(a.st, a.k / 32, s0) + (j0 - s0);
  VF sum[R][V];
  for (int r = 0; r < R; r++) for (int v = 0; v < V; v++) sum[r][v] = VF{};
  const float* xr = a.x + r0 * a.k;
  for (size_t g = 0; g < a.k / 32; g++) {
    VF gsum[R][V];
    for (int r = 0; r < R; r++) for (int v = 0; v < V; v++) gsum[r][v] = VF{};
    for (size_t i = g * 32; i < g * 32 + 32; i++) {
      VF w[V];
      for (int v = 0; v < V; v++) w[v] = load(ws + i * ld + size_t(v) * kLanes);
      for (int r = 0; r < R; r++) {
        const float xi = xr[size_t(r) * a.k + i];
        for (int v = 0; v < V; v++) gsum[r][v] = to_sum<S, P || Q>(gsum[r][v] + to<P, Q>(xi * w[v]));
      }
    }
    for (int v = 0; v < V; v++) {
      const VF sc = load(ss + g * ld + size_t(v) * kLanes);
      for (int r = 0; r < R; r++) sum[r][v] = to_sum<S, C || Q>(sum[r][v] + to<C, Q>(sc * gsum[r][v]));
    }
  }
  for (int r = 0; r < R; r++) {
    for (int v = 0; v < V; v++) store(a.out + (r0 + r) * a.n + j0 + size_t(v) * kLanes, stored(sum[r][v]));
  }
}

template <bool P, bool S, bool C, bool Q>
void mx_column (const MlxMxArgs& a, size_t r, size_t j) {
  const size_t s0 = j - j % kMlxUnitColumns, ld = strip_width(a.n, j);
  const float* ws = strip(a.wt, a.k, s0) + (j - s0);
  const float* ss = strip(a.st, a.k / 32, s0) + (j - s0);
  const float* xr = a.x + r * a.k;
  float sum = 0.0f;
  for (size_t g = 0; g < a.k / 32; g++) {
    float gsum = 0.0f;
    for (size_t i = g * 32; i < g * 32 + 32; i++) gsum = to<S, false>(gsum + to<P, false>(xr[i] * ws[i * ld]));
    sum = to<S, false>(sum + to<C, false>(ss[g * ld] * gsum));
  }
  a.out[r * a.n + j] = stored(sum);
}

template <int R, bool P, bool S, bool C, bool Q>
void mx_block (const MlxMxArgs& a, size_t r0, size_t j0, size_t j1) {
  size_t j = j0;
  for (; j + kMxVectors * kLanes <= j1; j += kMxVectors * kLanes) mx_tile<R, kMxVectors, P, S, C, Q>(a, r0, j);
  for (; j + kLanes <= j1; j += kLanes) mx_tile<R, 1, P, S, C, Q>(a, r0, j);
  for (; j < j1; j++) for (int r = 0; r < R; r++) mx_column<P, S, C, Q>(a, r0 + r, j);
}

// ---- units: kRows rows by kMlxUnitColumns columns (mlx_cpu_isa.h), the same for every ISA ----

template <class Args, class Block4, class Block1>
PDB_INLINE void run_units (const Args& a, size_t m, size_t begin, size_t end, Block4 block4, Block1 block1) {
  const size_t col_units = (a.n + kMlxUnitColumns - 1) / kMlxUnitColumns;
  for (size_t u = begin; u < end; u++) {
    const size_t r0 = (u / col_units) * kRows, j0 = (u % col_units) * kMlxUnitColumns;
    const size_t r1 = r0 + kRows < m ? r0 + kRows : m, j1 = j0 + kMlxUnitColumns < a.n ? j0 + kMlxUnitColumns : a.n;
    if (r1 - r0 == size_t(kRows)) {
      block4(a, r0, j0, j1);
    } else {
      for (size_t r = r0; r < r1; r++) block1(a, r, j0, j1);
    }
  }
}

template <bool P, bool S, bool Q>
void affine_units_t (const MlxAffineArgs& a, size_t m, size_t begin, size_t end) {
  run_units(a, m, begin, end, affine_block<kRows, P, S, Q>, affine_block<1, P, S, Q>);
}

template <bool P, bool S, bool C, bool Q>
void mx_units_t (const MlxMxArgs& a, size_t m, size_t begin, size_t end) {
  run_units(a, m, begin, end, mx_block<kRows, P, S, C, Q>, mx_block<1, P, S, C, Q>);
}

template <bool Q>
void affine_units_q (const MlxAffineArgs& a, size_t m, size_t begin, size_t end) {
  switch (a.rounding & 3) {
    case 0: affine_units_t<false, false, Q>(a, m, begin, end); break;
    case 1: affine_units_t<true, false, Q>(a, m, begin, end); break;
    case 2: affine_units_t<false, true, Q>(a, m, begin, end); break;
    default: affine_units_t<true, true, Q>(a, m, begin, end); break;
  }
}

template <bool Q>
void mx_units_q (const MlxMxArgs& a, size_t m, size_t begin, size_t end) {
  switch (a.rounding & 7) {
    case 0: mx_units_t<false, false, false, Q>(a, m, begin, end); break;
    case 1: mx_units_t<true, false, false, Q>(a, m, begin, end); break;
    case 2: mx_units_t<false, true, false, Q>(a, m, begin, end); break;
    case 3: mx_units_t<true, true, false, Q>(a, m, begin, end); break;
    case 4: mx_units_t<false, false, true, Q>(a, m, begin, end); break;
    case 5: mx_units_t<true, false, true, Q>(a, m, begin, end); break;
    case 6: mx_units_t<false, true, true, Q>(a, m, begin, end); break;
    default: mx_units_t<true, true, true, Q>(a, m, begin, end); break;
  }
}

void affine_units (const MlxAffineArgs& a, size_t m, size_t begin, size_t end) {
  if (a.rounding & kMlxOperandsNanSafe) {
    affine_units_q<true>(a, m, begin, end);
  } else {
    affine_units_q<false>(a, m, begin, end);
  }
}

void mx_units (const MlxMxArgs& a, size_t m, size_t begin, size_t end) {
  if (a.rounding & kMlxOperandsNanSafe) {
    mx_units_q<true>(a, m, begin, end);
  } else {
    mx_units_q<false>(a, m, begin, end);
  }
}

// The operand scan (MlxScan): per lane, a NaN that could carry ((b & 0x7fbf0000) == 0x7fbf0000)
// or-ed, and the smallest |b| - 1 as an unsigned integer (a zero wraps to the largest, so it never
// counts; NaNs and infinities are larger than every finite value).
MlxScan scan (const float* p, size_t count) {
  VU hit{};
  VU least = VU{} - 1u;
  size_t i = 0;
  for (; i + kLanes <= count; i += kLanes) {
    const VU b = (VU)load(p + i);
    hit |= (VU)((b & 0x7fbf0000u) == 0x7fbf0000u);
    const VU mag = (b & 0x7fffffffu) - 1u;
    least = mag < least ? mag : least;
  }
  uint32_t any = 0, low = 0xffffffffu;
  for (int l = 0; l < kLanes; l++) {
    any |= hit[l];
    low = least[l] < low ? least[l] : low;
  }
  for (; i < count; i++) {
    const uint32_t b = float_bits(p[i]);
    any |= (b & 0x7fbf0000u) == 0x7fbf0000u;
    const uint32_t mag = (b & 0x7fffffffu) - 1u;
    low = mag < low ? mag : low;
  }
  const uint32_t smallest = low + 1u;  // the smallest nonzero magnitude's bits (0 when none)
  int e = kMlxNoNonzero;
  if (smallest != 0 && smallest < 0x7f800000u) e = (smallest >> 23) == 0 ? -149 : int(smallest >> 23) - 127;
  return { any == 0, e };
}

#if defined(PDB_ISA_AVX512)
// ---- the vcvtne2ps2bf16 roundings (kMlxOperandsNormal): AVX512_BF16, chosen at run time ----

#define PDB_BF16 __attribute__((target("avx512bf16")))

// Both vectors rounded to bf16 at once: vcvtne2ps2bf16 packs b's 16 results above a's, and two
// masked word permutes put each back in its own lanes, shifted into the upper half (1.5
// instructions a vector, against four for the integer rounding). Right for every input but a
// denormal one, which the instruction reads as zero (kMlxOperandsNormal rules those out).
PDB_BF16 PDB_INLINE void round_pair (VF& a, VF& b, __m512i lo, __m512i hi) {
  const __m512i z = (__m512i)_mm512_cvtne2ps_pbh((__m512)b, (__m512)a);
  a = (VF)_mm512_maskz_permutexvar_epi16(0xAAAAAAAAu, lo, z);
  b = (VF)_mm512_maskz_permutexvar_epi16(0xAAAAAAAAu, hi, z);
}

// acc = bf16(acc + bf16(p)) on a pair of vectors: the one step of every paired-rounding tile (a
// product into its running sum, a scaled group sum into the output's).
PDB_BF16 PDB_INLINE void add_rounded_pair (VF& acc0, VF& acc1, VF p0, VF p1, __m512i lo, __m512i hi) {
  round_pair(p0, p1, lo, hi);
  acc0 += p0;
  acc1 += p1;
  round_pair(acc0, acc1, lo, hi);
}

// The word permutes' indices: odd word 2i + 1 takes packed word i (a) or 16 + i (b).
PDB_BF16 PDB_INLINE void pair_indices (__m512i* lo, __m512i* hi) {
  alignas(64) uint16_t l[32], h[32];
  for (int j = 0; j < 32; j++) {
    l[j] = uint16_t(j / 2);
    h[j] = uint16_t(16 + j / 2);
  }
  *lo = _mm512_load_si512(l);
  *hi = _mm512_load_si512(h);
}

// affine_tile<R, 2, true, true, true> on the paired roundings.
template <int R>
PDB_BF16 void affine_tile_bf16 (const MlxAffineArgs& a, size_t r0, size_t j0) {
  __m512i lo, hi;
  pair_indices(&lo, &hi);
  const size_t s0 = j0 - j0 % kMlxUnitColumns, ld = strip_width(a.n, j0);
  const float* ws = strip(a.wt, a.k, s0) + (j0 - s0);
  VF acc[R][2];
  for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = VF{};
  const float* xr = a.x + r0 * a.k;
  for (size_t i = 0; i < a.k; i++) {
    const VF w0 = load(ws + i * ld), w1 = load(ws + i * ld + kLanes);
    for (int r = 0; r < R; r++) {
      const float xi = xr[size_t(r) * a.k + i];
      add_rounded_pair(acc[r][0], acc[r][1], xi * w0, xi * w1, lo, hi);
    }
  }
  for (int r = 0; r < R; r++) {
    for (int v = 0; v < 2; v++) store(a.out + (r0 + r) * a.n + j0 + size_t(v) * kLanes, stored(acc[r][v]));
  }
}

// mx_tile<R, 2, true, true, true, true> on the paired roundings.
template <int R>
PDB_BF16 void mx_tile_bf16 (const MlxMxArgs& a, size_t r0, size_t j0) {
  __m512i lo, hi;
  pair_indices(&lo, &hi);
  const size_t s0 = j0 - j0 % kMlxUnitColumns, ld = strip_width(a.n, j0);
  const float* ws = strip(a.wt, a.k, s0) + (j0 - s0);
  const float* ss = strip(a.st, a.k / 32, s0) + (j0 - s0);
  VF sum[R][2];
  for (int r = 0; r < R; r++) sum[r][0] = sum[r][1] = VF{};
  const float* xr = a.x + r0 * a.k;
  for (size_t g = 0; g < a.k / 32; g++) {
    VF gsum[R][2];
    for (int r = 0; r < R; r++) gsum[r][0] = gsum[r][1] = VF{};
    for (size_t i = g * 32; i < g * 32 + 32; i++) {
      const VF w0 = load(ws + i * ld), w1 = load(ws + i * ld + kLanes);
      for (int r = 0; r < R; r++) {
        const float xi = xr[size_t(r) * a.k + i];
        add_rounded_pair(gsum[r][0], gsum[r][1], xi * w0, xi * w1, lo, hi);
      }
    }
    const VF sc0 = load(ss + g * ld), sc1 = load(ss + g * ld + kLanes);
    for (int r = 0; r < R; r++) add_rounded_pair(sum[r][0], sum[r][1], sc0 * gsum[r][0], sc1 * gsum[r][1], lo, hi);
  }
  for (int r = 0; r < R; r++) {
    for (int v = 0; v < 2; v++) store(a.out + (r0 + r) * a.n + j0 + size_t(v) * kLanes, stored(sum[r][v]));
  }
}

// Rows [r0, r0 + R) by columns [j0, j1): pairs of vectors on the paired roundings, the rest as
// the NaN-safe integer path does (the same bits).
template <int R>
void affine_block_bf16 (const MlxAffineArgs& a, size_t r0, size_t j0, size_t j1) {
  size_t j = j0;
  for (; j + 2 * kLanes <= j1; j += 2 * kLanes) affine_tile_bf16<R>(a, r0, j);
  for (; j + kLanes <= j1; j += kLanes) affine_tile<R, 1, true, true, true>(a, r0, j);
  for (; j < j1; j++) for (int r = 0; r < R; r++) affine_column<true, true, true>(a, r0 + r, j);
}

template <int R>
void mx_block_bf16 (const MlxMxArgs& a, size_t r0, size_t j0, size_t j1) {
  size_t j = j0;
  for (; j + 2 * kLanes <= j1; j += 2 * kLanes) mx_tile_bf16<R>(a, r0, j);
  for (; j + kLanes <= j1; j += kLanes) mx_tile<R, 1, true, true, true, true>(a, r0, j);
  for (; j < j1; j++) for (int r = 0; r < R; r++) mx_column<true, true, true, true>(a, r0 + r, j);
}

void affine_units_bf16 (const MlxAffineArgs& a, size_t m, size_t begin, size_t end) {
  run_units(a, m, begin, end, affine_block_bf16<kRows>, affine_block_bf16<1>);
}

void mx_units_bf16 (const MlxMxArgs& a, size_t m, size_t begin, size_t end) {
  run_units(a, m, begin, end, mx_block_bf16<kRows>, mx_block_bf16<1>);
}
#endif

}  // namespace

#define PDB_STR2(x) #x
#define PDB_STR(x) PDB_STR2(x)

extern const MlxCpuIsaKernels kMlxCpuKernels;
#if defined(PDB_ISA_AVX512)
const MlxCpuIsaKernels kMlxCpuKernels = { PDB_STR(PDB_ISA_NS), mx_units, affine_units, scan, mx_units_bf16, affine_units_bf16 };
#else
const MlxCpuIsaKernels kMlxCpuKernels = { PDB_STR(PDB_ISA_NS), mx_units, affine_units, scan, nullptr, nullptr };
#endif

}  // namespace PDB_ISA_NS
}  // namespace pdb
