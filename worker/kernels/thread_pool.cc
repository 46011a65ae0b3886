#include "worker/kernels/thread_pool.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define GANTRY_CPU_RELAX() _mm_pause()
#else
#define GANTRY_CPU_RELAX() std::this_thread::yield()
#endif

namespace gantry::kernels {
namespace {

// Pause instructions a worker spins before sleeping: some tens of microseconds, longer
// than the gaps between a decode step's regions and short against a request's gaps.
constexpr int kSpinsBeforeSleep = 20000;

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  for (int t = 1; t < n_threads_; ++t) threads_.emplace_back([this, t] { WorkerLoop(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void ThreadPool::Dispatch(Call call, const void* ctx) {
  if (n_threads_ == 1) {
    call(ctx, 0);
    return;
  }
  call_ = call;
  ctx_ = ctx;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  {
    // A worker counts itself sleeping and re-checks generation_ under mu_, so either it
    // sees the new generation or we see it asleep here.
    std::unique_lock<std::mutex> lock(mu_);
    const bool any_asleep = sleeping_ > 0;
    lock.unlock();
    if (any_asleep) wake_.notify_all();
  }
  call(ctx, 0);
  // Workers finish within microseconds of us when they have cores; when the machine is
  // oversubscribed, yielding lets a descheduled worker run.
  for (int spin = 0; pending_.load(std::memory_order_acquire) != 0; ++spin) {
    if (spin < 4096) GANTRY_CPU_RELAX();
    else std::this_thread::yield();
  }
}

void ThreadPool::WorkerLoop(int thread) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t g = generation_.load(std::memory_order_acquire);
    for (int spin = 0; g == seen && spin < kSpinsBeforeSleep; ++spin) {
      GANTRY_CPU_RELAX();
      g = generation_.load(std::memory_order_acquire);
    }
    if (g == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      ++sleeping_;
      wake_.wait(lock, [&] { return stop_ || generation_.load(std::memory_order_acquire) != seen; });
      --sleeping_;
      if (stop_) return;
      g = generation_.load(std::memory_order_acquire);
    }
    seen = g;
    call_(ctx_, thread);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace gantry::kernels
