#include "worker/kernels/thread_pool.h"

#include <atomic>
#include <chrono>
#include <vector>

#include "gtest/gtest.h"

namespace gantry::kernels {
namespace {

TEST(ThreadPoolTest, ParallelForCoversTheRangeOnceInGrains) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int n : {0, 1, 7, 64, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      std::atomic<int> bad_grain{0};
      ParallelFor(&pool, n, 4, [&](int begin, int end, int thread) {
        if (begin % 4 != 0 || thread < 0 || thread >= threads) bad_grain++;
        for (int i = begin; i < end; ++i) hits[i]++;
      });
      for (int i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << threads << " threads, n " << n << ", i " << i;
      EXPECT_EQ(bad_grain.load(), 0);
    }
  }
}

TEST(ThreadPoolTest, ManyShortRegionsAndEveryThreadRuns) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> per_thread(3);
  for (int region = 0; region < 5000; ++region) {
    pool.Run([&](int thread) { per_thread[thread]++; });
  }
  for (int t = 0; t < 3; ++t) EXPECT_EQ(per_thread[t].load(), 5000);
}

TEST(ThreadPoolTest, WakesAfterSleeping) {
  ThreadPool pool(2);
  std::atomic<int> runs{0};
  pool.Run([&](int) { runs++; });
  // Past the spin budget, the worker sleeps; the next region must wake it.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  pool.Run([&](int) { runs++; });
  EXPECT_EQ(runs.load(), 4);
}

TEST(ThreadPoolTest, NullPoolRunsInline) {
  int calls = 0;
  ParallelFor(nullptr, 10, 3, [&](int begin, int end, int thread) {
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 10);
    EXPECT_EQ(thread, 0);
    calls++;
  });
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace gantry::kernels
