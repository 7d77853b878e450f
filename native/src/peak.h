// Machine peaks that the benchmark prints next to kernel speeds.
#pragma once

#include <cstddef>

namespace pdb {

// AVX2 float32 multiply + add throughput (separate vmulps and vaddps, no FMA: the same
// instruction mix as the kernels) on `threads` threads for about `millis` ms. GFLOP/s,
// counting each lane of each mul and each add as one flop.
double measure_peak_gflops (int threads, double millis);

// Streaming copy of `bytes` bytes (rounded down to 32), `repeats` times, split between
// `threads` threads. GB/s counting bytes read plus bytes written.
double measure_stream_gbps (int threads, size_t bytes, int repeats);

}  // namespace pdb
