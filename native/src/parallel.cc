// The thread count and the output-range splitter. Chunks run on a pool of persistent workers
// (thread_pool.h) or on threads started for the call (PD_KERNEL_POOL, docs/kernels.md "Threading
// rule"): a decode step makes hundreds of kernel calls, and starting fresh threads for each costs
// more than the work itself at 16 threads. The split is the same whatever runs a chunk.
#include "parallel.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <thread>
#include <vector>

#include "thread_pool.h"

namespace pdb {

static int default_threads () {
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : int(hw);
}

static std::atomic<int> configured_threads{default_threads()};

int kernel_threads () { return configured_threads.load(); }

void set_kernel_threads (int n) { configured_threads.store(n < 1 ? 1 : n); }

// PD_KERNEL_POOL: "on", "off", or unset (on where the machine has 4 or more hardware threads; on 2
// cores shared with the rest of a stack the pool measured slower, docs/kernels.md). The TypeScript
// loader refuses any other value before a kernel runs (src/kernels/native.ts).
static bool pool_wanted () {
  const char* v = std::getenv("PD_KERNEL_POOL");
  if (v != nullptr && std::strcmp(v, "on") == 0) return true;
  if (v != nullptr && std::strcmp(v, "off") == 0) return false;
  return default_threads() >= 4;
}

static const bool use_pool = pool_wanted();

bool kernel_pool_on () { return use_pool; }

namespace {

// The old way, for a call made while the pool is busy (a kernel called from inside a chunk, or two
// JavaScript threads at once): one fresh thread per chunk but the first.
void run_on_fresh_threads (size_t chunks, const ChunkBounds& bounds, RangeBody body, const void* context) {
  std::vector<std::thread> workers;
  std::vector<size_t> inline_chunks;
  workers.reserve(chunks - 1);
  for (size_t c = 1; c < chunks; c++) {
    try {
      workers.emplace_back(body, context, bounds.begin(c), bounds.end(c));
    } catch (const std::system_error&) {
      inline_chunks.push_back(c);
    }
  }
  body(context, bounds.begin(0), bounds.end(0));
  for (size_t c : inline_chunks) body(context, bounds.begin(c), bounds.end(c));
  for (auto& t : workers) t.join();
}

}  // namespace

void parallel_ranges_raw (size_t count, size_t grain, int threads, RangeBody body, const void* context) {
  if (count == 0) return;
  if (grain == 0) grain = 1;
  const size_t grains = (count + grain - 1) / grain;
  const size_t chunks = std::min(grains, size_t(threads < 1 ? 1 : threads));
  if (chunks <= 1) {
    body(context, 0, count);
    return;
  }
  // Chunk c gets grains [c*grains/chunks, (c+1)*grains/chunks): balanced, contiguous.
  const ChunkBounds bounds{count, grain, grains, chunks};
  if (!use_pool || !ThreadPool::instance().run(chunks, bounds, body, context)) run_on_fresh_threads(chunks, bounds, body, context);
}

}  // namespace pdb
