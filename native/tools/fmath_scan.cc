// Exhaustive accuracy scan of native/src/fmath.h against double-precision libm (a development tool,
// not part of the addon). Build and run from the repository root:
//   g++ -O2 -std=c++17 -mavx2 -ffp-contract=off -Inative/src native/tools/fmath_scan.cc -o /tmp/fmath_scan -lm
//   /tmp/fmath_scan [stride [only]]      (only: a substring of the function names to scan, e.g. softplus)
// For every float32 input (every `stride`-th bit pattern), it prints per function the largest error
// in units of the last place of the float32 grid at the double result, the share of inputs more
// than 0.5 ulp away (not correctly rounded) and more than 1 ulp away, and whether the 8-lane
// exp8_f32 agrees with exp_f32 on every input.
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include "fmath.h"

namespace {

double ulp_at (double r) {
  const double a = std::fabs(r);
  if (a < 0x1p-126) return 0x1p-149;
  int e = 0;
  std::frexp(a, &e);  // a = m 2^e, m in [0.5, 1)
  return std::ldexp(1.0, e - 1 - 23);
}

// Error of y (float) against the exact r, in float32 ulps at r; overflow to Inf is exact when
// r is at or beyond the rounding boundary 2^128 - 2^103.
double ulp_error (float y, double r) {
  if (std::isnan(r)) return std::isnan(y) ? 0 : 1e30;
  if (std::isnan(y)) return 1e30;
  const double big = 0x1p128 - 0x1p103;
  if (std::isinf(r) || std::fabs(r) >= big) {
    if (std::isinf(y) && (std::signbit(y) == std::signbit(r))) return 0;
    return (std::fabs(r) - std::fabs(double(y))) / 0x1p104;
  }
  if (std::isinf(y)) return (0x1p128 - std::fabs(r)) / 0x1p104;
  return std::fabs(double(y) - r) / ulp_at(r);
}

struct Stat {
  const char* name;
  double worst = 0;
  float worst_x = 0;
  unsigned long long count = 0, above_half = 0, above_one = 0;
  void add (float x, float y, double r) {
    const double e = ulp_error(y, r);
    count++;
    if (e > 0.5) above_half++;
    if (e > 1.0) above_one++;
    if (e > worst) { worst = e; worst_x = x; }
  }
  void print () const {
    std::printf("%-13s max %.4f ulp at x = %a (%.9g)  >0.5 ulp: %.4f%%  >1 ulp: %llu of %llu\n", name, worst,
                double(worst_x), double(worst_x), 100.0 * double(above_half) / double(count ? count : 1), above_one, count);
  }
};

double softplus_ref (double x) { return x > 20 ? x : std::log1p(std::exp(x)); }

}  // namespace

int main (int argc, char** argv) {
  const unsigned long long stride = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1;
  const char* only = argc > 2 ? argv[2] : "";
  auto want = [only](const char* name) { return std::strstr(name, only) != nullptr; };
  Stat se{"exp"}, sl{"log"}, sl1{"log1p"}, ss{"sigmoid"}, ssp{"softplus"}, ssi{"silu"}, ssq{"sqrtsoftplus"};
  unsigned long long vector_mismatch = 0;
  for (unsigned long long b = 0; b < (1ull << 32); b += stride) {
    float x;
    const uint32_t bits = uint32_t(b);
    std::memcpy(&x, &bits, 4);
    if (std::isnan(x)) continue;
    const double xd = x;
    if (want("exp")) se.add(x, pdb::exp_f32(x), std::exp(xd));
    if (x >= 0 && want("log")) sl.add(x, pdb::log_f32(x), std::log(xd));
    if (x >= -1 && want("log1p")) sl1.add(x, pdb::log1p_f32(x), std::log1p(xd));
    if (want("sigmoid")) ss.add(x, pdb::sigmoid_f32(x), 1.0 / (1.0 + std::exp(-xd)));
    const double sp = softplus_ref(xd);
    if (want("softplus")) ssp.add(x, pdb::softplus_f32(x), sp);
    if (want("silu")) ssi.add(x, pdb::silu_f32(x), std::isinf(xd) ? (xd > 0 ? xd : -0.0) : xd / (1.0 + std::exp(-xd)));
    if (want("sqrtsoftplus")) ssq.add(x, pdb::sqrtsoftplus_f32(x), std::sqrt(sp));
    if (!want("exp")) continue;
    float lanes[8], out[8];
    for (int l = 0; l < 8; l++) lanes[l] = x;
    _mm256_storeu_ps(out, pdb::exp8_f32(_mm256_loadu_ps(lanes)));
    const float e1 = pdb::exp_f32(x);
    if (std::memcmp(&out[3], &e1, 4) != 0) vector_mismatch++;
  }
  for (const Stat* s : {&se, &sl, &sl1, &ss, &ssp, &ssi, &ssq}) if (s->count > 0) s->print();
  std::printf("exp8_f32 lanes differing from exp_f32: %llu\n", vector_mismatch);
  return 0;
}
