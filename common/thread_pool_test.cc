#include "common/thread_pool.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "gtest/gtest.h"

namespace gantry {
namespace {

// A gate that blocked tasks wait at until it opens.
class Gate {
 public:
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    ++waiting_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  // Waits until `n` tasks wait at the gate (10 s at most); false if they never do.
  bool Waiting(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return waiting_ >= n; });
  }
  int waiting() {
    std::lock_guard<std::mutex> lock(mu_);
    return waiting_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int waiting_ = 0;
  bool open_ = false;
};

TEST(ThreadPoolTest, GrowsWhenEveryThreadIsBusyUpToItsCap) {
  ThreadPool pool("test-pool", 1, 3);
  Gate gate;
  std::atomic<int> done{0};
  for (int i = 0; i < 4; ++i) {
    pool.Run([&] {
      gate.Wait();
      ++done;
    });
  }
  // Three threads at most: three tasks block at the gate, the fourth waits its turn.
  ASSERT_TRUE(gate.Waiting(3));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(gate.waiting(), 3);
  EXPECT_EQ(done.load(), 0);
  gate.Open();
  pool.Stop();
  EXPECT_EQ(done.load(), 4);
}

TEST(ThreadPoolTest, StopRunsWhatIsQueuedAndDropsWhatComesAfter) {
  std::atomic<int> ran{0};
  ThreadPool pool("test-pool", 1, 1);
  Gate gate;
  pool.Run([&] { gate.Wait(); });
  ASSERT_TRUE(gate.Waiting(1));
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(pool.Run([&] { ++ran; }));
  std::thread stopper([&] { pool.Stop(); });
  gate.Open();
  stopper.join();
  EXPECT_EQ(ran.load(), 5);
  EXPECT_FALSE(pool.Run([&] { ++ran; }));
  pool.Stop();
  EXPECT_EQ(ran.load(), 5);
}

}  // namespace
}  // namespace gantry
