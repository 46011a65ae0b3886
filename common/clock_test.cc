#include "common/clock.h"

#include <gtest/gtest.h>

namespace gantry {
namespace {

TEST(ClockTest, SystemMonotonicNeverGoesBack) {
  int64_t prev = SystemClock().MonotonicMicros();
  for (int i = 0; i < 1000; ++i) {
    int64_t now = SystemClock().MonotonicMicros();
    ASSERT_GE(now, prev);
    prev = now;
  }
  // After 2020-01-01 and before 2100.
  EXPECT_GT(SystemClock().UnixMicros(), 1'577'836'800'000'000);
  EXPECT_LT(SystemClock().UnixMicros(), 4'102'444'800'000'000);
}

TEST(ClockTest, DeadlineOnFakeClock) {
  FakeClock clock;
  Deadline deadline(clock, 1000);
  EXPECT_FALSE(deadline.Expired());
  EXPECT_EQ(deadline.RemainingMicros(), 1000);
  clock.Advance(999);
  EXPECT_FALSE(deadline.Expired());
  EXPECT_EQ(deadline.RemainingMicros(), 1);
  clock.Advance(1);
  EXPECT_TRUE(deadline.Expired());
  clock.Advance(50);
  EXPECT_EQ(deadline.RemainingMicros(), 0);
}

}  // namespace
}  // namespace gantry
