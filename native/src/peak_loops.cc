// The inner loops of peak.cc's measurements, compiled once per ISA (the mul+add peak is the peak of
// the 8-lane type the kernels use: vmulps/vaddps on the AVX2 path, whatever plain C++ becomes on
// the portable one).
#include "isa_kernels.h"
#include "simd8.h"

namespace pdb {
namespace PDB_ISA_NS {

// Six independent mul chains and six add chains: enough in flight to cover a 3-cycle
// latency on two pipes each. 12 vector ops x 8 lanes = 96 flops per iteration.
float peak_mul_add_loop (size_t iterations, float scale_value, float step_value) {
  const F8 scale = f8_set1(scale_value);
  const F8 step = f8_set1(step_value);
  F8 m0 = f8_set1(1.0f), m1 = f8_set1(1.1f), m2 = f8_set1(1.2f);
  F8 m3 = f8_set1(1.3f), m4 = f8_set1(1.4f), m5 = f8_set1(1.5f);
  F8 a0 = f8_set1(2.0f), a1 = f8_set1(2.1f), a2 = f8_set1(2.2f);
  F8 a3 = f8_set1(2.3f), a4 = f8_set1(2.4f), a5 = f8_set1(2.5f);
  for (size_t i = 0; i < iterations; i++) {
    m0 = m0 * scale; a0 = a0 + step;
    m1 = m1 * scale; a1 = a1 + step;
    m2 = m2 * scale; a2 = a2 + step;
    m3 = m3 * scale; a3 = a3 + step;
    m4 = m4 * scale; a4 = a4 + step;
    m5 = m5 * scale; a5 = a5 + step;
  }
  F8 all = ((m0 + m1) + (m2 + m3)) + ((m4 + m5) + (a0 + a1));
  all = all + ((a2 + a3) + (a4 + a5));
  return f8_first(all);
}

// dst[i] = src[i] for i in [begin, end), 8 floats at a time (end - begin a multiple of 8), `repeats` times.
void peak_copy (float* dst, const float* src, size_t begin, size_t end, int repeats) {
  for (int r = 0; r < repeats; r++) {
    for (size_t i = begin; i < end; i += 8) f8_store(dst + i, f8_load(src + i));
  }
}

}  // namespace PDB_ISA_NS
}  // namespace pdb
