// A fixed set of threads that run one parallel region at a time, for the forward pass.
//
// ThreadPool(n) starts n - 1 worker threads once; the calling thread is thread 0 of
// every region, so a pool of 1 runs everything inline. Run() hands a region to the
// workers with one atomic increment: workers spin briefly for the next region (a decode
// step issues one every few microseconds), then sleep on a condition variable, so an
// idle pool costs no CPU. No thread is created or allocation made per region.
//
// Thread-safety: one caller at a time (a Session's forward pass); regions do not nest.
#ifndef GANTRY_WORKER_KERNELS_THREAD_POOL_H_
#define GANTRY_WORKER_KERNELS_THREAD_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace gantry::kernels {

class ThreadPool {
 public:
  // Precondition: n_threads >= 1.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(thread) once on each thread in [0, size()) and returns when all have
  // returned. fn must not throw.
  template <class F>
  void Run(const F& fn) {
    Dispatch([](const void* f, int thread) { (*static_cast<const F*>(f))(thread); }, &fn);
  }

  // Splits [0, n) into size() contiguous ranges of whole `grain`s (the last may be
  // short) and calls fn(begin, end, thread) for each non-empty one.
  template <class F>
  void ParallelFor(int n, int grain, const F& fn) {
    const int units = (n + grain - 1) / grain;
    Run([&](int thread) {
      const int u0 = static_cast<int>(static_cast<int64_t>(units) * thread / n_threads_);
      const int u1 = static_cast<int>(static_cast<int64_t>(units) * (thread + 1) / n_threads_);
      const int begin = u0 * grain, end = u1 * grain < n ? u1 * grain : n;
      if (begin < end) fn(begin, end, thread);
    });
  }

 private:
  using Call = void (*)(const void* ctx, int thread);
  void Dispatch(Call call, const void* ctx);
  void WorkerLoop(int thread);

  const int n_threads_;
  std::vector<std::thread> threads_;
  // The current region: written before generation_ is bumped (release), read after a
  // worker observes the bump (acquire).
  Call call_ = nullptr;
  const void* ctx_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};  // workers still running the current region
  std::mutex mu_;
  std::condition_variable wake_;
  int sleeping_ = 0;  // guarded by mu_
  bool stop_ = false;  // guarded by mu_
};

// Runs fn(begin, end, thread) over [0, n) on `pool`, or inline as one range when pool is
// null.
template <class F>
void ParallelFor(ThreadPool* pool, int n, int grain, const F& fn) {
  if (n <= 0) return;
  if (!pool || pool->size() == 1) {
    fn(0, n, 0);
    return;
  }
  pool->ParallelFor(n, grain, fn);
}

}  // namespace gantry::kernels

#endif  // GANTRY_WORKER_KERNELS_THREAD_POOL_H_
