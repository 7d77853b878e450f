// Our own float32 exp, log, log1p, sigmoid, softplus, silu and sqrt(softplus): every step a float32
// operation (no FMA, no double, no libm), so src/kernels/fmath.ts repeats them bit for bit with
// Math.fround. docs/kernels.md ("Transcendental functions") derives each one and states its accuracy.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernel_order.h"

namespace pdb {
namespace PDB_ISA_NS {

namespace fm {

constexpr float kLog2e = 0x1.715476p+0f;          // log2(e) rounded
constexpr float kShift = 0x1.8p+23f;              // 1.5 * 2^23: (t + shift) - shift rounds t to an integer
constexpr float kLn2Hi = 0x1.62e4p-1f;            // ln 2 with 15 significant bits: k * kLn2Hi is exact
constexpr float kLn2Lo = 0x1.7f7d1cp-20f;         // ln 2 - kLn2Hi, rounded
// Taylor coefficients 1/n! of exp, n = 3..7 (1/2 is exact).
constexpr float kE3 = 0x1.555556p-3f, kE4 = 0x1.555556p-5f, kE5 = 0x1.111112p-7f;
constexpr float kE6 = 0x1.6c16c2p-10f, kE7 = 0x1.a01a02p-13f;
// 2/n for n = 3, 5, 7, 9: log(1+f) = 2 atanh(s) = 2s + s * z * (2/3 + z (2/5 + z (2/7 + z 2/9))), z = s^2.
constexpr float kL3 = 0x1.555556p-1f, kL5 = 0x1.99999ap-2f, kL7 = 0x1.24924ap-2f, kL9 = 0x1.c71c72p-3f;
constexpr float kExpOverflow = 0x1.62e42ep+6f;    // 88.7228317: the largest x with a finite exp(x)
constexpr float kExpUnderflow = -104.0f;          // exp(x) < 2^-150 below: rounds to +0
constexpr float kPartsFloor = -120.0f;            // exp_parts is exact in its scaling down to here
constexpr uint32_t kSqrt2MantissaBits = 0x3504f3; // mantissa of 1.41421354 (just below sqrt 2)

inline float pow2 (int e) { return bits_float(uint32_t(e + 127) << 23); }  // e in [-126, 127]

// exp(x) = (hi + lo) 2^k with hi + lo = exp(r) to about 2^-30 relative, r = x - k ln 2,
// |r| <= ln2/2 (plus rounding), |lo| <= ulp(hi)/2. Valid for x in [-120, 89].
struct ExpParts {
  float hi;
  float lo;
  int k;
};

inline ExpParts exp_parts (float x) {
  const float t = x * kLog2e;
  const float kf = (t + kShift) - kShift;
  const float rh = x - kf * kLn2Hi;       // exact (Sterbenz)
  const float rl = kf * kLn2Lo;
  const float r = rh - rl;
  const float q = 0.5f + r * (kE3 + r * (kE4 + r * (kE5 + r * (kE6 + r * kE7))));
  // 1 + r + r^2 q with 1 + rh split exactly (Fast2Sum), so only the last add rounds at p's scale.
  const float one_hi = 1.0f + rh;
  const float one_lo = (1.0f - one_hi) + rh;
  const float tail = one_lo + ((r * r) * q - rl);
  const float hi = one_hi + tail;
  return { hi, (one_hi - hi) + tail, int(kf) };
}

// p * 2^k in two exact-then-rounded steps, so subnormal results round once and 2^128 needs no table.
inline float scale_pow2 (float p, int k) {
  const int k2 = k > 127 ? 1 : (k < -126 ? -64 : 0);
  return (p * pow2(k - k2)) * pow2(k2);
}

inline float nan () { return bits_float(kCanonicalNanBits); }

// The rounding error of a * b, exactly, when nothing overflows or underflows (Dekker's product
// with Veltkamp's 12-bit split): a * b = p + two_prod_err(a, b, p) for p = a * b rounded.
inline float two_prod_err (float a, float b, float p) {
  const float ca = 4097.0f * a;
  const float ah = ca - (ca - a);
  const float al = a - ah;
  const float cb = 4097.0f * b;
  const float bh = cb - (cb - b);
  const float bl = b - bh;
  return (((ah * bh - p) + ah * bl) + al * bh) + al * bl;
}

// (nh + nl) / (dh + dl), rounded once at the end: y0 = nh / dh, then one correction from the exact
// residual nh - y0 dh (representable for a rounded quotient) and the low parts.
inline float divide_pairs (float nh, float nl, float dh, float dl) {
  const float y0 = nh / dh;
  const float p = y0 * dh;
  const float rem = (((nh - p) - two_prod_err(y0, dh, p)) + nl) - y0 * dl;
  return y0 + rem / dh;
}

// exp(-a) for a in [0, 80] as th + tl (normal th), and d = 1 + exp(-a) as dh + dl exactly.
struct OnePlusExp {
  float th, tl, dh, dl;
};

inline OnePlusExp one_plus_exp_neg (float a) {
  const ExpParts e = exp_parts(-a);
  const float s = pow2(e.k);
  const float th = e.hi * s;
  const float tl = e.lo * s;
  const float dh = 1.0f + th;
  return { th, tl, dh, ((1.0f - dh) + th) + tl };
}

// log(1+f) for f = m - 1, m in [sqrt(1/2), sqrt 2), plus e ln 2 and a small extra term `tiny`,
// arranged so the large parts are added last: e*ln2hi + (f - (f^2/2 - (s (f^2/2 + R) + e*ln2lo + tiny))).
inline float log_reduced (float f, int e, float tiny) {
  const float s = f / (2.0f + f);
  const float z = s * s;
  const float big_r = z * (kL3 + z * (kL5 + z * (kL7 + z * kL9)));
  const float hfsq = (0.5f * f) * f;
  const float ef = float(e);
  const float lo = s * (hfsq + big_r) + (ef * kLn2Lo + tiny);
  return ef * kLn2Hi + (f - (hfsq - lo));
}

// u > 0 finite normal or subnormal: u = 2^e m with m in [sqrt(1/2), sqrt 2); returns f = m - 1 (exact).
inline float split_log_argument (float u, int* e) {
  int extra = 0;
  if (u < 0x1p-126f) {
    u = u * 0x1p23f;
    extra = -23;
  }
  const uint32_t b = float_bits(u);
  const uint32_t mant = b & 0x7fffffu;
  int exponent = int((b >> 23) & 0xffu) - 127 + extra;
  float m;
  if (mant > kSqrt2MantissaBits) {
    m = bits_float(mant | 0x3f000000u);  // [sqrt(1/2), 1)
    exponent += 1;
  } else {
    m = bits_float(mant | 0x3f800000u);  // [1, sqrt 2)
  }
  *e = exponent;
  return m - 1.0f;
}

// log(1 + xh + xl) for finite xh > -1, |xh| >= 2^-24, |xl| tiny: u = 1 + xh rounded, the rounding
// error recovered exactly (Fast2Sum, larger operand first) and added as c / u.
inline float log1p_pair (float xh, float xl) {
  const float u = 1.0f + xh;
  const float c = (xh <= 1.0f ? (1.0f - u) + xh : (xh - u) + 1.0f) + xl;
  int e = 0;
  const float f = split_log_argument(u, &e);
  return log_reduced(f, e, c / u);
}

}  // namespace fm

/** exp(x), float32. NaN -> canonical NaN; above 88.7228317 -> +Inf; below -104 -> +0. */
inline float exp_f32 (float x) {
  if (x != x) return fm::nan();
  if (x > fm::kExpOverflow) return INFINITY;
  if (x < fm::kExpUnderflow) return 0.0f;
  const fm::ExpParts e = fm::exp_parts(x);
  return fm::scale_pow2(e.hi, e.k);
}

/** log(x), float32. NaN or x < 0 -> NaN; +-0 -> -Inf; +Inf -> +Inf. */
inline float log_f32 (float x) {
  if (x != x || x < 0.0f) return fm::nan();
  if (x == 0.0f) return -INFINITY;
  if (x == INFINITY) return INFINITY;
  int e = 0;
  const float f = fm::split_log_argument(x, &e);
  return fm::log_reduced(f, e, 0.0f);
}

/** log(1 + x), float32. NaN or x < -1 -> NaN; -1 -> -Inf; +Inf -> +Inf; |x| < 2^-24 -> x. */
inline float log1p_f32 (float x) {
  if (x != x || x < -1.0f) return fm::nan();
  if (x == -1.0f) return -INFINITY;
  if (x == INFINITY) return INFINITY;
  if (std::fabs(x) < 0x1p-24f) return x;
  return fm::log1p_pair(x, 0.0f);
}

/**
 * 1 / (1 + exp(-x)) from t = exp(-|x|) carried as a hi/lo pair: 1 / (1 + t) for x >= 0,
 * t / (1 + t) below, one rounding at the end. |x| > 80: 1, or exp(x) (t / (1 + t) == t there).
 */
inline float sigmoid_f32 (float x) {
  if (x != x) return fm::nan();
  const float a = std::fabs(x);
  if (a > 80.0f) return x > 0.0f ? 1.0f : exp_f32(x);
  const fm::OnePlusExp d = fm::one_plus_exp_neg(a);
  return x >= 0.0f ? fm::divide_pairs(1.0f, 0.0f, d.dh, d.dl) : fm::divide_pairs(d.th, d.tl, d.dh, d.dl);
}

/** torch's softplus (beta 1, threshold 20): x > 20 ? x : log1p(exp(x)), exp(x) carried as hi/lo. */
inline float softplus_f32 (float x) {
  if (x != x) return fm::nan();
  if (x > 20.0f) return x;
  if (x < -80.0f) return exp_f32(x);  // log1p(t) == t in float32 for t < 2^-24
  const fm::ExpParts e = fm::exp_parts(x);
  const float s = fm::pow2(e.k);
  const float th = e.hi * s;
  const float tl = e.lo * s;
  // log1p(t) = t - t^2/2 + t^3/3 ...: below 2^-14 the cubic term is under 2^-29 t.
  if (th < 0x1p-14f) return th + (tl - (0.5f * th) * th);
  return fm::log1p_pair(th, tl);
}

/**
 * x * sigmoid(x) = x / (1 + exp(-x)), one rounding at the end: x / (1 + t) for x >= 0,
 * x t / (1 + t) below. x > 20 gives x (the quotient rounds to x), +-0 gives itself. Below -64, 1 + t == 1 in float32
 * and x exp(x) is formed from the unscaled exp parts, (x (p 2^(k+64))) 2^-64, so a subnormal exp(x)
 * loses no bits. Below -120 (and at -Inf): -0.
 */
inline float silu_f32 (float x) {
  if (x != x) return fm::nan();
  if (x > 20.0f || x == 0.0f) return x;  // the quotient rounds to x; +-0 keeps its sign
  if (x < -64.0f) {
    if (x < fm::kPartsFloor) return -0.0f;
    const fm::ExpParts e = fm::exp_parts(x);
    const float s = fm::pow2(e.k + 64);
    const float th = e.hi * s;
    const float n = x * th;
    return (n + (fm::two_prod_err(x, th, n) + x * (e.lo * s))) * fm::pow2(-64);
  }
  const fm::OnePlusExp d = fm::one_plus_exp_neg(std::fabs(x));
  if (x >= 0.0f) return fm::divide_pairs(x, 0.0f, d.dh, d.dl);
  const float n = x * d.th;
  return fm::divide_pairs(n, fm::two_prod_err(x, d.th, n) + x * d.tl, d.dh, d.dl);
}

/** sqrt(softplus(x)), the sqrtsoftplus router score (sqrt correctly rounded); below -20, exp(x / 2). */
inline float sqrtsoftplus_f32 (float x) {
  if (x < -20.0f) return exp_f32(0.5f * x);
  return std::sqrt(softplus_f32(x));
}

// ---- 8 lanes at once: the same float32 operations in the same order, so every lane equals exp_f32.

inline F8 exp8_f32 (F8 x) {
  const F8 xc = f8_min(f8_max(x, f8_set1(fm::kPartsFloor)), f8_set1(fm::kExpOverflow));
  const F8 t = xc * f8_set1(fm::kLog2e);
  const F8 shift = f8_set1(fm::kShift);
  const F8 kf = (t + shift) - shift;
  const F8 rh = xc - kf * f8_set1(fm::kLn2Hi);
  const F8 rl = kf * f8_set1(fm::kLn2Lo);
  const F8 r = rh - rl;
  F8 q = f8_set1(fm::kE6) + r * f8_set1(fm::kE7);
  q = f8_set1(fm::kE5) + r * q;
  q = f8_set1(fm::kE4) + r * q;
  q = f8_set1(fm::kE3) + r * q;
  q = f8_set1(0.5f) + r * q;
  const F8 one = f8_set1(1.0f);
  const F8 hi = one + rh;
  const F8 lo = (one - hi) + rh;
  const F8 p = hi + (lo + ((r * r) * q - rl));
  // k2 = k > 127 ? 1 : (k < -126 ? -64 : 0); y = (p * 2^(k - k2)) * 2^k2.
  const I8 k = f8_trunc_i32(kf);
  const I8 k2 = (i8_gt(k, i8_set1(127)) & i8_set1(1)) - (i8_gt(i8_set1(uint32_t(-126)), k) & i8_set1(64));
  const I8 bias = i8_set1(127);
  const F8 s1 = i8_as_f8(i8_shl<23>((k - k2) + bias));
  const F8 s2 = i8_as_f8(i8_shl<23>(k2 + bias));
  F8 y = (p * s1) * s2;
  y = f8_blend(y, f8_set1(INFINITY), f8_gt(x, f8_set1(fm::kExpOverflow)));
  y = f8_blend(y, f8_zero(), f8_lt(x, f8_set1(fm::kExpUnderflow)));
  return f8_blend(y, i8_as_f8(i8_set1(kCanonicalNanBits)), f8_unord(x, x));
}

}  // namespace PDB_ISA_NS
}  // namespace pdb
