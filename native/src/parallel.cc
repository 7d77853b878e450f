#include "parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
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

namespace {

// One call's split: chunk c gets grains [c*grains/chunks, (c+1)*grains/chunks), balanced and contiguous.
struct Split {
  RangeBody body;
  const void* context;
  size_t count, grain, grains, chunks;
  size_t begin (size_t c) const { return std::min(count, (c * grains / chunks) * grain); }
  void run (size_t c) const { body(context, begin(c), begin(c + 1)); }
};

// Threads started once and kept: a prefill makes thousands of parallel calls, and starting and
// joining up to 15 threads per call cost a few percent of it on 16 cores. One call at a time
// uses the pool; a second caller meanwhile (another JavaScript thread) starts its own threads.
// The split is the same either way, so no result depends on which path ran.
class Pool {
 public:
  // Chunks 1.. on the pool's threads, chunk 0 on the caller; false if the pool is busy or cannot grow.
  bool run (const Split& split) {
    std::unique_lock<std::mutex> call(call_, std::try_to_lock);
    if (!call.owns_lock() || !grow(split.chunks - 1)) return false;
    {
      std::lock_guard<std::mutex> lock(m_);
      split_ = split;
      pending_ = split.chunks - 1;
      generation_++;
    }
    start_.notify_all();
    split.run(0);
    std::unique_lock<std::mutex> lock(m_);
    done_.wait(lock, [&] { return pending_ == 0; });
    return true;
  }

 private:
  // At least `workers` threads (under call_). A thread that cannot start leaves the pool as it was.
  bool grow (size_t workers) {
    while (threads_.size() < workers) {
      try {
        // It starts at the current generation, so it never runs a split that ended before it began.
        threads_.emplace_back(&Pool::work, this, threads_.size() + 1, generation_);
      } catch (const std::system_error&) {
        return false;
      }
    }
    return true;
  }

  // Thread `index` runs chunk `index` of every split that has one.
  void work (size_t index, uint64_t seen) {
    std::unique_lock<std::mutex> lock(m_);
    for (;;) {
      start_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      if (index >= split_.chunks) continue;
      const Split split = split_;
      lock.unlock();
      split.run(index);
      lock.lock();
      if (--pending_ == 0) done_.notify_one();
    }
  }

  std::mutex call_;
  std::mutex m_;
  std::condition_variable start_, done_;
  std::vector<std::thread> threads_;
  uint64_t generation_ = 0;
  Split split_{};
  size_t pending_ = 0;
};

// Never destroyed: its threads wait until the process ends (a joinable std::thread destroyed at
// exit would call std::terminate).
Pool& pool () {
  static Pool* p = new Pool();
  return *p;
}

// The path without the pool: threads started for this call and joined; a chunk whose thread
// cannot start runs on the caller.
void run_spawned (const Split& split) {
  std::vector<std::thread> workers;
  std::vector<size_t> inline_chunks;
  workers.reserve(split.chunks - 1);
  for (size_t c = 1; c < split.chunks; c++) {
    try {
      workers.emplace_back(split.body, split.context, split.begin(c), split.begin(c + 1));
    } catch (const std::system_error&) {
      inline_chunks.push_back(c);
    }
  }
  split.run(0);
  for (size_t c : inline_chunks) split.run(c);
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
  const Split split{body, context, count, grain, grains, chunks};
  if (!pool().run(split)) run_spawned(split);
}

}  // namespace pdb
