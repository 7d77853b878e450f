#include "peak.h"

#include <immintrin.h>

#include <chrono>
#include <thread>
#include <vector>

namespace pdb {

namespace {

using Clock = std::chrono::steady_clock;

// Runtime operands so the compiler cannot fold the loop away.
volatile float g_scale = 1.0f;
volatile float g_step = 1.0e-7f;
volatile float g_sink = 0.0f;

// Six independent mul chains and six add chains: enough in flight to cover a 3-cycle
// latency on two pipes each. 12 vector ops x 8 lanes = 96 flops per iteration.
constexpr double kFlopsPerIteration = 96.0;

void mul_add_loop (size_t iterations) {
  const __m256 scale = _mm256_set1_ps(g_scale);
  const __m256 step = _mm256_set1_ps(g_step);
  __m256 m0 = _mm256_set1_ps(1.0f), m1 = _mm256_set1_ps(1.1f), m2 = _mm256_set1_ps(1.2f);
  __m256 m3 = _mm256_set1_ps(1.3f), m4 = _mm256_set1_ps(1.4f), m5 = _mm256_set1_ps(1.5f);
  __m256 a0 = _mm256_set1_ps(2.0f), a1 = _mm256_set1_ps(2.1f), a2 = _mm256_set1_ps(2.2f);
  __m256 a3 = _mm256_set1_ps(2.3f), a4 = _mm256_set1_ps(2.4f), a5 = _mm256_set1_ps(2.5f);
  for (size_t i = 0; i < iterations; i++) {
    m0 = _mm256_mul_ps(m0, scale); a0 = _mm256_add_ps(a0, step);
    m1 = _mm256_mul_ps(m1, scale); a1 = _mm256_add_ps(a1, step);
    m2 = _mm256_mul_ps(m2, scale); a2 = _mm256_add_ps(a2, step);
    m3 = _mm256_mul_ps(m3, scale); a3 = _mm256_add_ps(a3, step);
    m4 = _mm256_mul_ps(m4, scale); a4 = _mm256_add_ps(a4, step);
    m5 = _mm256_mul_ps(m5, scale); a5 = _mm256_add_ps(a5, step);
  }
  __m256 all = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(m0, m1), _mm256_add_ps(m2, m3)),
                             _mm256_add_ps(_mm256_add_ps(m4, m5), _mm256_add_ps(a0, a1)));
  all = _mm256_add_ps(all, _mm256_add_ps(_mm256_add_ps(a2, a3), _mm256_add_ps(a4, a5)));
  g_sink = _mm256_cvtss_f32(all);
}

double seconds_since (Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Run `body(t)` on `threads` threads at once; the wall time in seconds.
template <class F>
double timed_on_threads (int threads, F body) {
  std::vector<std::thread> workers;
  const auto t0 = Clock::now();
  for (int t = 1; t < threads; t++) workers.emplace_back(body, t);
  body(0);
  for (auto& w : workers) w.join();
  return seconds_since(t0);
}

}  // namespace

double measure_peak_gflops (int threads, double millis) {
  if (threads < 1) threads = 1;
  // Calibrate on one thread, then give every thread the same count.
  size_t iterations = size_t(1) << 16;
  for (;;) {
    const auto t0 = Clock::now();
    mul_add_loop(iterations);
    const double s = seconds_since(t0);
    if (s * 1000.0 >= millis / 8.0 || iterations >= (size_t(1) << 34)) {
      iterations = size_t(double(iterations) * (millis / 1000.0) / (s > 0 ? s : 1e-9));
      break;
    }
    iterations *= 4;
  }
  if (iterations == 0) iterations = 1;
  const double s = timed_on_threads(threads, [iterations](int) { mul_add_loop(iterations); });
  return kFlopsPerIteration * double(iterations) * threads / s / 1e9;
}

double measure_stream_gbps (int threads, size_t bytes, int repeats) {
  if (threads < 1) threads = 1;
  if (repeats < 1) repeats = 1;
  const size_t floats = (bytes / 32) * 8;
  if (floats == 0) return 0.0;
  std::vector<float> src(floats, 1.0f), dst(floats, 0.0f);
  const size_t per_thread = (floats / 8 + threads - 1) / threads * 8;
  auto copy = [&](int t) {
    const size_t begin = size_t(t) * per_thread;
    const size_t end = begin + per_thread < floats ? begin + per_thread : floats;
    for (int r = 0; r < repeats; r++) {
      for (size_t i = begin; i < end; i += 8) _mm256_storeu_ps(&dst[i], _mm256_loadu_ps(&src[i]));
    }
  };
  const double s = timed_on_threads(threads, copy);
  g_sink = dst[floats - 1];
  return 2.0 * double(floats) * sizeof(float) * repeats / s / 1e9;
}

}  // namespace pdb
