// Persistent workers for parallel_ranges (parallel.cc). Worker i always runs chunk i + 1 of a call,
// the calling thread chunk 0, so which thread computes what is as fixed as the split itself; and a
// chunk is whole output elements, so results cannot depend on the pool (parallel.h).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "parallel.h"

namespace pdb {

// Chunk c of a split of [0, count) into `chunks` runs of whole grains: [begin(c), end(c)).
struct ChunkBounds {
  size_t count, grain, grains, chunks;
  size_t begin (size_t c) const { return std::min(count, (c * grains / chunks) * grain); }
  size_t end (size_t c) const { return begin(c + 1); }
};

class ThreadPool {
 public:
  // The process's pool: created on first use and never destroyed (its workers are detached, so
  // exit does not wait for them or join them).
  static ThreadPool& instance ();

  // Chunks 1.. on the workers, chunk 0 on the caller; returns when all are done. Returns false,
  // having run nothing, when the pool is already running a call (a kernel called from inside a
  // chunk, or from a second JavaScript thread): the caller then runs the chunks another way.
  bool run (size_t chunks, const ChunkBounds& bounds, RangeBody body, const void* context);

 private:
  struct Slot;
  ThreadPool () = default;
  size_t grow (size_t workers);
  void serve (Slot* slot);

  std::atomic<bool> busy_{false};
  std::vector<Slot*> slots_;
  alignas(64) std::atomic<size_t> remaining_{0};
};

}  // namespace pdb
