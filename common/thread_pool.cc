#include "common/thread_pool.h"

#include <pthread.h>

#include <algorithm>
#include <system_error>
#include <utility>

namespace gantry {

ThreadPool::ThreadPool(std::string name, size_t start_threads, size_t max_threads)
    : name_(std::move(name)), max_threads_(std::max<size_t>(1, max_threads)) {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t n = std::min(std::max<size_t>(1, start_threads), max_threads_);
  for (size_t i = 0; i < n; ++i) threads_.emplace_back([this] { Loop(); });
}

ThreadPool::~ThreadPool() { Stop(); }

bool ThreadPool::Run(std::function<void()> task) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) return false;
  if (!idle_.empty()) {
    Waiter* waiter = idle_.back();
    idle_.pop_back();
    waiter->task = std::move(task);
    waiter->cv.notify_one();
    return true;
  }
  tasks_.push_back(std::move(task));
  if (threads_.size() < max_threads_) {
    try {
      threads_.emplace_back([this] { Loop(); });
    } catch (const std::system_error&) {
      // No more threads: the task waits for a free one.
    }
  }
  return true;
}

void ThreadPool::Stop() {
  std::lock_guard<std::mutex> stopping(stop_mu_);
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    for (Waiter* waiter : idle_) waiter->cv.notify_one();
    threads.swap(threads_);
  }
  for (auto& t : threads) t.join();
}

void ThreadPool::Loop() {
  pthread_setname_np(pthread_self(), name_.substr(0, 15).c_str());
  Waiter self;
  while (true) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (tasks_.empty() && !stop_) {
        idle_.push_back(&self);
        self.cv.wait(lock, [&] { return self.task != nullptr || stop_; });
        if (self.task != nullptr) {
          task = std::move(self.task);  // Run took `self` off idle_
          self.task = nullptr;
        } else {
          idle_.erase(std::find(idle_.begin(), idle_.end(), &self));
        }
      }
      if (task == nullptr) {
        if (tasks_.empty()) return;  // stopping and drained
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
    }
    task();
  }
}

}  // namespace gantry
