#include "peak.h"

#include <chrono>
#include <thread>
#include <vector>

#include "isa.h"

namespace pdb {

namespace {

using Clock = std::chrono::steady_clock;

// Runtime operands so the compiler cannot fold the loop away.
volatile float g_scale = 1.0f;
volatile float g_step = 1.0e-7f;
volatile float g_sink = 0.0f;

// 12 vector ops x 8 lanes = 96 flops per iteration of the ISA's loop (isa_kernels.h).
constexpr double kFlopsPerIteration = 96.0;

void mul_add_loop (size_t iterations) {
  g_sink = kernels().peak_mul_add_loop(iterations, g_scale, g_step);
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
  const auto copy_rows = kernels().peak_copy;
  auto copy = [&](int t) {
    const size_t begin = size_t(t) * per_thread;
    const size_t end = begin + per_thread < floats ? begin + per_thread : floats;
    if (begin < end) copy_rows(dst.data(), src.data(), begin, end, repeats);
  };
  const double s = timed_on_threads(threads, copy);
  g_sink = dst[floats - 1];
  return 2.0 * double(floats) * sizeof(float) * repeats / s / 1e9;
}

}  // namespace pdb
