// Splitting work between threads. Only OUTPUT elements are ever split: a thread computes whole
// dot products and whole rows, so the result cannot depend on the thread count.
#pragma once

#include <cstddef>
#include <functional>

namespace pdb {

// Below this many multiply-adds (or touched elements) a call stays on the calling thread:
// starting a thread costs tens of microseconds.
constexpr size_t kMinParallelWork = size_t(1) << 20;

// The configured thread count (default: the hardware's, at least 1).
int kernel_threads ();
void set_kernel_threads (int n);

// Run body(begin, end) over [0, count) split into contiguous chunks whose boundaries are
// multiples of `grain`, one chunk per thread, on at most `threads` threads (the caller's
// thread runs the first chunk). If a thread cannot be started its chunk runs on the caller.
void parallel_ranges (size_t count, size_t grain, int threads,
                      const std::function<void(size_t, size_t)>& body);

// The thread count for a call doing `work` units: 1 for small calls, else the configured count.
inline int threads_for (size_t work) {
  return work < kMinParallelWork ? 1 : kernel_threads();
}

}  // namespace pdb
