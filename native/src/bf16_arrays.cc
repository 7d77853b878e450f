#include "bf16_arrays.h"

#include <atomic>
#include <cstring>

#include "parallel.h"

namespace pdb {

void decode_bf16_array (const uint16_t* codes, size_t length, float* out, int threads) {
  parallel_ranges(length, 1024, threads, [&](size_t i0, size_t i1) {
    for (size_t i = i0; i < i1; i++) {
      const uint32_t b = uint32_t(codes[i]) << 16;
      std::memcpy(out + i, &b, 4);
    }
  });
}

namespace {

// Values checked between looks at the other threads' verdict: long enough for the branch-free
// loop to vectorize, short enough that a failing tensor stops early.
constexpr size_t kExactChunk = 4096;

// The codes of values[i0, i1), and whether any value there is not exactly bf16.
bool chunk_codes (const float* values, size_t i0, size_t i1, uint16_t* out) {
  uint32_t inexact = 0;
  for (size_t i = i0; i < i1; i++) {
    uint32_t b;
    std::memcpy(&b, values + i, 4);
    // As the reference: exact bits keep their code (a NaN too); a NaN with low bits set becomes quiet.
    const bool low = (b & 0xffffu) != 0;
    const bool nan = (b & 0x7fffffffu) > 0x7f800000u;
    out[i] = uint16_t(low && nan ? (((b >> 16) & 0x8000u) | 0x7fc0u) : (b >> 16));
    inexact |= uint32_t(low && !nan);
  }
  return inexact != 0;
}

}  // namespace

bool exact_bf16_codes (const float* values, size_t length, uint16_t* out, int threads) {
  std::atomic<bool> inexact(false);
  parallel_ranges(length, kExactChunk, threads, [&](size_t i0, size_t i1) {
    for (size_t c = i0; c < i1 && !inexact.load(std::memory_order_relaxed); c += kExactChunk) {
      const size_t end = c + kExactChunk < i1 ? c + kExactChunk : i1;
      if (chunk_codes(values, c, end, out)) inexact.store(true, std::memory_order_relaxed);
    }
  });
  return !inexact.load();
}

}  // namespace pdb
