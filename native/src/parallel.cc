#include "parallel.h"

#include <algorithm>
#include <atomic>
#include <system_error>
#include <thread>
#include <vector>

namespace pdb {

static int default_threads () {
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : int(hw);
}

static std::atomic<int> configured_threads{default_threads()};

int kernel_threads () { return configured_threads.load(); }

void set_kernel_threads (int n) { configured_threads.store(n < 1 ? 1 : n); }

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
  auto bound = [&](size_t c) { return std::min(count, (c * grains / chunks) * grain); };
  std::vector<std::thread> workers;
  std::vector<size_t> inline_chunks;
  workers.reserve(chunks - 1);
  for (size_t c = 1; c < chunks; c++) {
    const size_t begin = bound(c), end = bound(c + 1);
    try {
      workers.emplace_back(body, context, begin, end);
    } catch (const std::system_error&) {
      inline_chunks.push_back(c);
    }
  }
  body(context, 0, bound(1));
  for (size_t c : inline_chunks) body(context, bound(c), bound(c + 1));
  for (auto& t : workers) t.join();
}

}  // namespace pdb
