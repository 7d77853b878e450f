// The 8-lane float32 type every vector kernel is written against, in two implementations that give
// the same bits (docs/kernels.md, "Portable build and ISA dispatch"):
//
//   PDB_ISA_AVX2      one __m256 / __m256i, AVX2 intrinsics (translation units built with -mavx2 -mf16c -mfma)
//   PDB_ISA_AVX512    the same __m256 code, in translation units also built with -mavx512f -mavx512dq
//                     -mavx512bw -mavx512vl, whose matmul adds 512-bit tiles (matmul_zmm.h)
//   PDB_ISA_PORTABLE  an array of 8 floats / uint32s, element-wise plain C++ (any CPU, any compiler)
//
// Every operation is element-wise and rounds once per lane exactly as the AVX2 instruction does
// (IEEE float32, round to nearest even; -ffp-contract=off, so `a * b + c` is never fused behind our
// back). The one fused operation is explicit: f8_fma / fma1 (vfmadd, or std::fmaf, one rounding),
// used only by the lanes8-fma order. The few
// non-arithmetic instructions keep their x86 meaning in the portable form too: min/max return the
// second operand unless the first is strictly smaller/larger (so a NaN in either picks the second),
// truncation of NaN or out-of-range values gives INT32_MIN, compares give all-ones lanes.
//
// A file that includes this header is compiled once per ISA. Everything it defines, including the
// inline helpers of kernel_order.h, fmath.h and dot_tile.h, lives in namespace pdb::PDB_ISA_NS
// (pdb::avx2 or pdb::portable), so no AVX2-compiled inline function can stand in for the portable
// one at link time. Those files use no std templates either (no std::vector, no std::function):
// a template instantiated in both would be one weak symbol, and the linker would keep either copy.
#pragma once

#include <cfloat>
#include <math.h>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if (defined(PDB_ISA_AVX2) + defined(PDB_ISA_AVX512) + defined(PDB_ISA_PORTABLE)) != 1
#error "define one of PDB_ISA_AVX2, PDB_ISA_AVX512 and PDB_ISA_PORTABLE"
#elif defined(PDB_ISA_AVX2)
#if !defined(__AVX2__) || !defined(__FMA__)
#error "PDB_ISA_AVX2 translation units are compiled with -mavx2 -mf16c -mfma"
#endif
#include <immintrin.h>
#define PDB_ISA_NS avx2
#define PDB_X86_VECTORS 1
#elif defined(PDB_ISA_AVX512)
#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__AVX512F__) || !defined(__AVX512DQ__)
#error "PDB_ISA_AVX512 translation units are compiled with -mavx2 -mf16c -mfma -mavx512f -mavx512dq -mavx512bw -mavx512vl"
#endif
#include <immintrin.h>
#define PDB_ISA_NS avx512
#define PDB_X86_VECTORS 1
#elif defined(PDB_ISA_PORTABLE)
#define PDB_ISA_NS portable
#else
#error "compile the kernels with -DPDB_ISA_AVX2, -DPDB_ISA_AVX512 or -DPDB_ISA_PORTABLE (native/binding.gyp does)"
#endif

// float expressions evaluated in float (SSE2 on x86-64, any AArch64): no wider intermediates.
#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "the kernels need FLT_EVAL_METHOD == 0 (float arithmetic in float32, e.g. -mfpmath=sse)"
#endif

#define PDB_INLINE inline __attribute__((always_inline))

namespace pdb {
namespace PDB_ISA_NS {

inline uint32_t float_bits (float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

inline float bits_float (uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

#if defined(PDB_X86_VECTORS)

struct F8 { __m256 v; };   // 8 float32 lanes
struct I8 { __m256i v; };  // 8 32-bit integer lanes (wrapping arithmetic)
struct M8 { __m256 v; };   // 8 lane conditions (all-ones or zero)

PDB_INLINE F8 f8_zero () { return { _mm256_setzero_ps() }; }
PDB_INLINE F8 f8_set1 (float x) { return { _mm256_set1_ps(x) }; }
PDB_INLINE F8 f8_load (const float* p) { return { _mm256_loadu_ps(p) }; }
PDB_INLINE void f8_store (float* p, F8 a) { _mm256_storeu_ps(p, a.v); }
PDB_INLINE F8 operator+ (F8 a, F8 b) { return { _mm256_add_ps(a.v, b.v) }; }
PDB_INLINE F8 operator- (F8 a, F8 b) { return { _mm256_sub_ps(a.v, b.v) }; }
PDB_INLINE F8 operator* (F8 a, F8 b) { return { _mm256_mul_ps(a.v, b.v) }; }
PDB_INLINE F8 operator/ (F8 a, F8 b) { return { _mm256_div_ps(a.v, b.v) }; }
// a * b + c with one rounding (vfmadd231ps): only the lanes8-fma order uses it.
PDB_INLINE F8 f8_fma (F8 a, F8 b, F8 c) { return { _mm256_fmadd_ps(a.v, b.v, c.v) }; }
PDB_INLINE float fma1 (float a, float b, float c) {
  return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}
PDB_INLINE F8 f8_min (F8 a, F8 b) { return { _mm256_min_ps(a.v, b.v) }; }
PDB_INLINE F8 f8_max (F8 a, F8 b) { return { _mm256_max_ps(a.v, b.v) }; }
PDB_INLINE F8 f8_xor (F8 a, F8 b) { return { _mm256_xor_ps(a.v, b.v) }; }
PDB_INLINE M8 f8_gt (F8 a, F8 b) { return { _mm256_cmp_ps(a.v, b.v, _CMP_GT_OQ) }; }
PDB_INLINE M8 f8_lt (F8 a, F8 b) { return { _mm256_cmp_ps(a.v, b.v, _CMP_LT_OQ) }; }
PDB_INLINE M8 f8_le (F8 a, F8 b) { return { _mm256_cmp_ps(a.v, b.v, _CMP_LE_OQ) }; }
PDB_INLINE M8 f8_unord (F8 a, F8 b) { return { _mm256_cmp_ps(a.v, b.v, _CMP_UNORD_Q) }; }
// Lane l: m true ? b : a.
PDB_INLINE F8 f8_blend (F8 a, F8 b, M8 m) { return { _mm256_blendv_ps(a.v, b.v, m.v) }; }
// [a0 - b0, a1 + b1, a2 - b2, ...]
PDB_INLINE F8 f8_addsub (F8 a, F8 b) { return { _mm256_addsub_ps(a.v, b.v) }; }
// [a1, a0, a3, a2, ...]
PDB_INLINE F8 f8_swap_pairs (F8 a) { return { _mm256_permute_ps(a.v, 0xb1) }; }
// [p0, p0, p1, p1, p2, p2, p3, p3]
PDB_INLINE F8 f8_load_pairs (const float* p) {
  const __m128 v = _mm_loadu_ps(p);
  return { _mm256_set_m128(_mm_unpackhi_ps(v, v), _mm_unpacklo_ps(v, v)) };
}
// 8 bf16 codes widened exactly: each code becomes the top 16 bits of a float32.
PDB_INLINE F8 f8_load_bf16 (const uint16_t* p) {
  const __m128i codes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return { _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(codes), 16)) };
}
// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)): the 256 -> 128 -> 64 -> 32 bit halving.
PDB_INLINE float f8_lane_tree (F8 lanes) {
  const __m128 lo = _mm256_castps256_ps128(lanes.v);
  const __m128 hi = _mm256_extractf128_ps(lanes.v, 1);
  const __m128 s = _mm_add_ps(lo, hi);                       // [l0+l4, l1+l5, l2+l6, l3+l7]
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));       // [s0+s2, s1+s3, ., .]
  const __m128 u = _mm_add_ss(t, _mm_shuffle_ps(t, t, 1));   // t0 + t1
  return _mm_cvtss_f32(u);
}
PDB_INLINE float f8_first (F8 a) { return _mm256_cvtss_f32(a.v); }
// Transpose 8 registers as an 8 x 8 matrix (lane l of r[q] becomes lane q of r[l]); moves bits only.
PDB_INLINE void f8_transpose8 (F8 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0].v, r[1].v), t1 = _mm256_unpackhi_ps(r[0].v, r[1].v);
  const __m256 t2 = _mm256_unpacklo_ps(r[2].v, r[3].v), t3 = _mm256_unpackhi_ps(r[2].v, r[3].v);
  const __m256 t4 = _mm256_unpacklo_ps(r[4].v, r[5].v), t5 = _mm256_unpackhi_ps(r[4].v, r[5].v);
  const __m256 t6 = _mm256_unpacklo_ps(r[6].v, r[7].v), t7 = _mm256_unpackhi_ps(r[6].v, r[7].v);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
  r[0].v = _mm256_permute2f128_ps(u0, u4, 0x20); r[1].v = _mm256_permute2f128_ps(u1, u5, 0x20);
  r[2].v = _mm256_permute2f128_ps(u2, u6, 0x20); r[3].v = _mm256_permute2f128_ps(u3, u7, 0x20);
  r[4].v = _mm256_permute2f128_ps(u0, u4, 0x31); r[5].v = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[6].v = _mm256_permute2f128_ps(u2, u6, 0x31); r[7].v = _mm256_permute2f128_ps(u3, u7, 0x31);
}

PDB_INLINE I8 i8_set1 (uint32_t x) { return { _mm256_set1_epi32(int(x)) }; }
// The bits of 8 floats, and back.
PDB_INLINE I8 i8_load (const float* p) { return { _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)) }; }
PDB_INLINE void i8_store (float* p, I8 a) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), a.v); }
PDB_INLINE I8 operator+ (I8 a, I8 b) { return { _mm256_add_epi32(a.v, b.v) }; }
PDB_INLINE I8 operator- (I8 a, I8 b) { return { _mm256_sub_epi32(a.v, b.v) }; }
PDB_INLINE I8 operator& (I8 a, I8 b) { return { _mm256_and_si256(a.v, b.v) }; }
PDB_INLINE I8 operator| (I8 a, I8 b) { return { _mm256_or_si256(a.v, b.v) }; }
// ~a & b
PDB_INLINE I8 i8_andnot (I8 a, I8 b) { return { _mm256_andnot_si256(a.v, b.v) }; }
template <int N> PDB_INLINE I8 i8_shl (I8 a) { return { _mm256_slli_epi32(a.v, N) }; }
template <int N> PDB_INLINE I8 i8_shr (I8 a) { return { _mm256_srli_epi32(a.v, N) }; }
// Signed compares, all-ones where true.
PDB_INLINE I8 i8_gt (I8 a, I8 b) { return { _mm256_cmpgt_epi32(a.v, b.v) }; }
PDB_INLINE I8 i8_eq (I8 a, I8 b) { return { _mm256_cmpeq_epi32(a.v, b.v) }; }
// Lane l: m all-ones ? b : a.
PDB_INLINE I8 i8_blend (I8 a, I8 b, I8 m) { return { _mm256_blendv_epi8(a.v, b.v, m.v) }; }
PDB_INLINE I8 f8_bits (F8 a) { return { _mm256_castps_si256(a.v) }; }
PDB_INLINE F8 i8_as_f8 (I8 a) { return { _mm256_castsi256_ps(a.v) }; }
// Truncation toward zero; NaN and out-of-range lanes give INT32_MIN.
PDB_INLINE I8 f8_trunc_i32 (F8 a) { return { _mm256_cvttps_epi32(a.v) }; }

#else  // PDB_ISA_PORTABLE

struct F8 { float v[8]; };
struct I8 { uint32_t v[8]; };
struct M8 { uint32_t v[8]; };

#define PDB_LANES for (int l = 0; l < 8; l++)

PDB_INLINE F8 f8_zero () { F8 r; PDB_LANES r.v[l] = 0.0f; return r; }
PDB_INLINE F8 f8_set1 (float x) { F8 r; PDB_LANES r.v[l] = x; return r; }
// Loads, stores and bit casts go lane by lane: whole-array memcpys here made GCC 12.2 for aarch64 at
// -O3 read a stack copy before writing it (wrong bf16 rounding in softmaxPool; isa-crosscheck.sh).
PDB_INLINE F8 f8_load (const float* p) { F8 r; PDB_LANES r.v[l] = p[l]; return r; }
PDB_INLINE void f8_store (float* p, F8 a) { PDB_LANES p[l] = a.v[l]; }
PDB_INLINE F8 operator+ (F8 a, F8 b) { F8 r; PDB_LANES r.v[l] = a.v[l] + b.v[l]; return r; }
PDB_INLINE F8 operator- (F8 a, F8 b) { F8 r; PDB_LANES r.v[l] = a.v[l] - b.v[l]; return r; }
PDB_INLINE F8 operator* (F8 a, F8 b) { F8 r; PDB_LANES r.v[l] = a.v[l] * b.v[l]; return r; }
PDB_INLINE F8 operator/ (F8 a, F8 b) { F8 r; PDB_LANES r.v[l] = a.v[l] / b.v[l]; return r; }
// a * b + c with one rounding: C's fmaf is correctly rounded (in hardware or in libm).
PDB_INLINE float fma1 (float a, float b, float c) { return ::fmaf(a, b, c); }
PDB_INLINE F8 f8_fma (F8 a, F8 b, F8 c) { F8 r; PDB_LANES r.v[l] = fma1(a.v[l], b.v[l], c.v[l]); return r; }
// minps / maxps: the second operand unless the first is strictly smaller / larger.
PDB_INLINE F8 f8_min (F8 a, F8 b) { F8 r; PDB_LANES r.v[l] = a.v[l] < b.v[l] ? a.v[l] : b.v[l]; return r; }
PDB_INLINE F8 f8_max (F8 a, F8 b) { F8 r; PDB_LANES r.v[l] = a.v[l] > b.v[l] ? a.v[l] : b.v[l]; return r; }
PDB_INLINE F8 f8_xor (F8 a, F8 b) {
  F8 r;
  PDB_LANES r.v[l] = bits_float(float_bits(a.v[l]) ^ float_bits(b.v[l]));
  return r;
}
PDB_INLINE M8 f8_gt (F8 a, F8 b) { M8 r; PDB_LANES r.v[l] = a.v[l] > b.v[l] ? ~0u : 0u; return r; }
PDB_INLINE M8 f8_lt (F8 a, F8 b) { M8 r; PDB_LANES r.v[l] = a.v[l] < b.v[l] ? ~0u : 0u; return r; }
PDB_INLINE M8 f8_le (F8 a, F8 b) { M8 r; PDB_LANES r.v[l] = a.v[l] <= b.v[l] ? ~0u : 0u; return r; }
PDB_INLINE M8 f8_unord (F8 a, F8 b) {
  M8 r;
  PDB_LANES r.v[l] = (a.v[l] != a.v[l] || b.v[l] != b.v[l]) ? ~0u : 0u;
  return r;
}
PDB_INLINE F8 f8_blend (F8 a, F8 b, M8 m) { F8 r; PDB_LANES r.v[l] = m.v[l] != 0 ? b.v[l] : a.v[l]; return r; }
PDB_INLINE F8 f8_addsub (F8 a, F8 b) {
  F8 r;
  for (int l = 0; l < 8; l += 2) {
    r.v[l] = a.v[l] - b.v[l];
    r.v[l + 1] = a.v[l + 1] + b.v[l + 1];
  }
  return r;
}
PDB_INLINE F8 f8_swap_pairs (F8 a) {
  F8 r;
  for (int l = 0; l < 8; l += 2) {
    r.v[l] = a.v[l + 1];
    r.v[l + 1] = a.v[l];
  }
  return r;
}
PDB_INLINE F8 f8_load_pairs (const float* p) {
  F8 r;
  for (int l = 0; l < 8; l++) r.v[l] = p[l / 2];
  return r;
}
PDB_INLINE F8 f8_load_bf16 (const uint16_t* p) {
  F8 r;
  PDB_LANES r.v[l] = bits_float(uint32_t(p[l]) << 16);
  return r;
}
PDB_INLINE float f8_lane_tree (F8 a) {
  const float* l = a.v;
  return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}
PDB_INLINE float f8_first (F8 a) { return a.v[0]; }
PDB_INLINE void f8_transpose8 (F8 r[8]) {
  F8 t[8];
  for (int q = 0; q < 8; q++) PDB_LANES t[l].v[q] = r[q].v[l];
  for (int q = 0; q < 8; q++) r[q] = t[q];
}

PDB_INLINE I8 i8_set1 (uint32_t x) { I8 r; PDB_LANES r.v[l] = x; return r; }
PDB_INLINE I8 i8_load (const float* p) { I8 r; PDB_LANES r.v[l] = float_bits(p[l]); return r; }
PDB_INLINE void i8_store (float* p, I8 a) { PDB_LANES p[l] = bits_float(a.v[l]); }
PDB_INLINE I8 operator+ (I8 a, I8 b) { I8 r; PDB_LANES r.v[l] = a.v[l] + b.v[l]; return r; }
PDB_INLINE I8 operator- (I8 a, I8 b) { I8 r; PDB_LANES r.v[l] = a.v[l] - b.v[l]; return r; }
PDB_INLINE I8 operator& (I8 a, I8 b) { I8 r; PDB_LANES r.v[l] = a.v[l] & b.v[l]; return r; }
PDB_INLINE I8 operator| (I8 a, I8 b) { I8 r; PDB_LANES r.v[l] = a.v[l] | b.v[l]; return r; }
PDB_INLINE I8 i8_andnot (I8 a, I8 b) { I8 r; PDB_LANES r.v[l] = ~a.v[l] & b.v[l]; return r; }
template <int N> PDB_INLINE I8 i8_shl (I8 a) { I8 r; PDB_LANES r.v[l] = a.v[l] << N; return r; }
template <int N> PDB_INLINE I8 i8_shr (I8 a) { I8 r; PDB_LANES r.v[l] = a.v[l] >> N; return r; }
PDB_INLINE I8 i8_gt (I8 a, I8 b) { I8 r; PDB_LANES r.v[l] = int32_t(a.v[l]) > int32_t(b.v[l]) ? ~0u : 0u; return r; }
PDB_INLINE I8 i8_eq (I8 a, I8 b) { I8 r; PDB_LANES r.v[l] = a.v[l] == b.v[l] ? ~0u : 0u; return r; }
PDB_INLINE I8 i8_blend (I8 a, I8 b, I8 m) { I8 r; PDB_LANES r.v[l] = m.v[l] != 0 ? b.v[l] : a.v[l]; return r; }
PDB_INLINE I8 f8_bits (F8 a) { I8 r; PDB_LANES r.v[l] = float_bits(a.v[l]); return r; }
PDB_INLINE F8 i8_as_f8 (I8 a) { F8 r; PDB_LANES r.v[l] = bits_float(a.v[l]); return r; }
PDB_INLINE I8 f8_trunc_i32 (F8 a) {
  I8 r;
  PDB_LANES {
    const float x = a.v[l];
    r.v[l] = (x >= -0x1p31f && x < 0x1p31f) ? uint32_t(int32_t(x)) : 0x80000000u;
  }
  return r;
}

#undef PDB_LANES

#endif

// A float buffer for a kernel's scratch rows (a std::vector<float> would be a template instantiated
// in both ISAs' files; see the top of this file). Contents are not initialised.
class Scratch {
 public:
  Scratch () = default;
  explicit Scratch (size_t n) { resize(n); }
  Scratch (const Scratch&) = delete;
  Scratch& operator= (const Scratch&) = delete;
  ~Scratch () { delete[] data_; }
  void resize (size_t n) {
    if (n <= capacity_) return;
    delete[] data_;
    data_ = nullptr;
    data_ = new float[n];
    capacity_ = n;
  }
  float* data () { return data_; }
  float& operator[] (size_t i) { return data_[i]; }

 private:
  float* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace PDB_ISA_NS
}  // namespace pdb
