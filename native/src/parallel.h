// Splitting work between threads. Only OUTPUT elements are ever split: a thread computes whole
// dot products and whole rows, so the result cannot depend on the thread count.
#pragma once

#include <cstddef>

namespace pdb {

// Below this many multiply-adds (or touched elements) a call stays on the calling thread:
// starting a thread costs tens of microseconds.
constexpr size_t kMinParallelWork = size_t(1) << 20;

// The same floor when chunks run on the pool's spinning workers (parallel.cc): handing a chunk over
// costs about a microsecond, so a decode step's small kernels (hcPost, the hyper-connection mix,
// one-token norms) can be split too.
constexpr size_t kMinPoolWork = size_t(1) << 16;

// The configured thread count (default: the hardware's, at least 1).
int kernel_threads ();
void set_kernel_threads (int n);

// Whether chunks run on the persistent workers (thread_pool.h) or on threads started per call.
bool kernel_pool_on ();

// Run body(begin, end) over [0, count) split into contiguous chunks whose boundaries are
// multiples of `grain`, one chunk per thread, on at most `threads` threads (the caller's
// thread runs the first chunk). If a thread cannot be started its chunk runs on the caller.
// The body is called through a plain function pointer (no std::function): the kernels that call
// this are compiled once per ISA, and must not share std template code (simd8.h says why).
using RangeBody = void (*)(const void* context, size_t begin, size_t end);
void parallel_ranges_raw (size_t count, size_t grain, int threads, RangeBody body, const void* context);

template <class F>
inline void parallel_ranges (size_t count, size_t grain, int threads, const F& body) {
  parallel_ranges_raw(count, grain, threads,
                      [](const void* c, size_t begin, size_t end) { (*static_cast<const F*>(c))(begin, end); }, &body);
}

// Units [0, count) dealt round-robin to at most `threads` chunks: chunk c gets units c, c + chunks,
// c + 2 chunks, ... and runs body(c, chunks) once, looping over them itself (so scratch is made
// once per chunk). For work whose cost grows along the index (causal attention: a later query sees
// more keys), where contiguous chunks would leave the last thread most of it. Which chunk runs a
// unit never changes what the unit computes.
template <class F>
inline void parallel_strided (size_t count, int threads, const F& body) {
  const size_t want = threads < 1 ? 1 : size_t(threads);
  const size_t chunks = count < want ? count : want;
  parallel_ranges(chunks, 1, int(chunks), [&](size_t c0, size_t c1) {
    for (size_t c = c0; c < c1; c++) body(c, chunks);
  });
}

// The thread count for a call doing `work` units: 1 for small calls, else the configured count.
inline int threads_for (size_t work) {
  return work < (kernel_pool_on() ? kMinPoolWork : kMinParallelWork) ? 1 : kernel_threads();
}

}  // namespace pdb
