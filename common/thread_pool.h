// A pool of threads that grows on demand: Run hands a task to the most recently idle
// thread (its stack and caches are warm), directly; when every thread is busy it starts
// one more, up to `max_threads`, and past that the task waits in order for a free one.
// Tasks may block (a stream's handler holds its thread until the stream ends).
//
//   ThreadPool pool("http-handler", 32, 4096);
//   pool.Run([] { ... });
//   pool.Stop();  // runs what is queued, then joins (the destructor does the same)
//
// Threads are named `name` (top -H, perf; at most 15 characters).
//
// Thread-safety: Run and Stop may be called from any thread, Stop not from a task.
#ifndef GANTRY_COMMON_THREAD_POOL_H_
#define GANTRY_COMMON_THREAD_POOL_H_

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gantry {

class ThreadPool {
 public:
  // Starts `start_threads` threads at once (at least one).
  ThreadPool(std::string name, size_t start_threads, size_t max_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Runs `task` on a pool thread; false (and `task` dropped) once Stop has begun. When
  // no thread can be started (pids limit, RLIMIT_NPROC), it waits for a free one.
  bool Run(std::function<void()> task);
  // Runs the tasks already queued, then joins every thread. Idempotent; a second call
  // returns once the first has joined them.
  void Stop();

 private:
  // A thread waiting for work; idle_ points at it while it waits.
  struct Waiter {
    std::condition_variable cv;
    std::function<void()> task;  // set by Run when it hands this thread a task
  };
  void Loop();

  const std::string name_;
  const size_t max_threads_;
  std::mutex stop_mu_;  // held for the whole of Stop
  std::mutex mu_;
  std::vector<Waiter*> idle_;  // the most recently idle last
  std::deque<std::function<void()>> tasks_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace gantry

#endif  // GANTRY_COMMON_THREAD_POOL_H_
