#include "thread_pool.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <system_error>
#include <thread>

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#include <immintrin.h>
static inline void cpu_relax () { _mm_pause(); }
#else
static inline void cpu_relax () { std::this_thread::yield(); }
#endif

namespace pdb {

namespace {

// How long a worker keeps polling for its next chunk before it sleeps, and the caller for the
// last chunk before it yields: kernel calls of one forward come microseconds apart.
constexpr auto kSpin = std::chrono::microseconds(100);

template <class Ready>
void spin_until (const Ready& ready, bool yield_after) {
  auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (unsigned i = 1; !ready(); i++) {
    cpu_relax();
    if (i % 64 == 0 && std::chrono::steady_clock::now() > deadline) {
      if (!yield_after) return;
      std::this_thread::yield();
    }
  }
}

}  // namespace

// One worker's mailbox, on its own cache lines (no false sharing between workers).
struct alignas(64) ThreadPool::Slot {
  std::atomic<uint64_t> ticket{0};
  RangeBody body = nullptr;
  const void* context = nullptr;
  size_t begin = 0, end = 0;
  std::mutex mu;
  std::condition_variable cv;
};

ThreadPool& ThreadPool::instance () {
  static ThreadPool* pool = new ThreadPool();
  return *pool;
}

size_t ThreadPool::grow (size_t workers) {
  while (slots_.size() < workers) {
    Slot* slot = new Slot();
    try {
      std::thread([this, slot] { serve(slot); }).detach();
    } catch (const std::system_error&) {
      delete slot;
      break;
    }
    slots_.push_back(slot);
  }
  return std::min(workers, slots_.size());
}

void ThreadPool::serve (Slot* slot) {
  uint64_t seen = 0;
  for (;;) {
    auto posted = [&] { return slot->ticket.load(std::memory_order_acquire) != seen; };
    spin_until(posted, false);
    if (!posted()) {
      std::unique_lock<std::mutex> lock(slot->mu);
      slot->cv.wait(lock, posted);
    }
    seen = slot->ticket.load(std::memory_order_acquire);
    slot->body(slot->context, slot->begin, slot->end);
    remaining_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

bool ThreadPool::run (size_t chunks, const ChunkBounds& bounds, RangeBody body, const void* context) {
  bool idle = false;
  if (!busy_.compare_exchange_strong(idle, true, std::memory_order_acquire)) return false;
  const size_t workers = grow(chunks - 1);
  remaining_.store(workers, std::memory_order_relaxed);
  for (size_t i = 0; i < workers; i++) {
    Slot* slot = slots_[i];
    slot->body = body;
    slot->context = context;
    slot->begin = bounds.begin(i + 1);
    slot->end = bounds.end(i + 1);
    {
      std::lock_guard<std::mutex> lock(slot->mu);
      slot->ticket.store(slot->ticket.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    }
    slot->cv.notify_one();
  }
  body(context, bounds.begin(0), bounds.end(0));
  // Chunks no worker could be started for run here, in order.
  for (size_t c = workers + 1; c < chunks; c++) body(context, bounds.begin(c), bounds.end(c));
  spin_until([this] { return remaining_.load(std::memory_order_acquire) == 0; }, true);
  busy_.store(false, std::memory_order_release);
  return true;
}

}  // namespace pdb
