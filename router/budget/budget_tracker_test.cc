#include "router/budget/budget_tracker.h"

#include <gtest/gtest.h>

#include "common/status.h"

namespace gantry::router {
namespace {

policy::Budgets Limits(int64_t day, int64_t month, int64_t rpm, int64_t concurrent) {
  policy::Budgets b;
  b.tokens_per_day = day;
  b.tokens_per_month = month;
  b.requests_per_minute = rpm;
  b.concurrent_requests = concurrent;
  return b;
}

// 2026-11-30 23:59:00 UTC.
constexpr int64_t kLateEvening = 1'796'083'140'000'000;

TEST(BudgetTrackerTest, ReservationCapsTheTotalAndSettlementReturnsTheRest) {
  FakeClock clock(kLateEvening - 3'600'000'000);
  BudgetTracker t(clock);
  auto b = Limits(1000, 100000, 100, 10);
  auto first = t.Admit("dana", b, 800);  // prompt 100 + max output 700
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->warning_percent, 80);
  // While 800 are reserved, a second request of 300 would pass the budget: refused up
  // front, not discovered after the answer.
  auto second = t.Admit("dana", b, 300);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(ReasonOf(second.status()), "budget_exhausted");
  EXPECT_GT(RetryAfterMs(second.status()), 0u);
  t.Settle(*first, 150);  // the answer was short
  EXPECT_EQ(t.UsageOf("dana").day_tokens, 150);
  EXPECT_TRUE(t.Admit("dana", b, 300).ok());
  // Other principals are untouched.
  EXPECT_TRUE(t.Admit("ada", b, 1000).ok());
}

TEST(BudgetTrackerTest, WarningsAtHalfAndFourFifths) {
  FakeClock clock(kLateEvening - 3'600'000'000);
  BudgetTracker t(clock);
  auto b = Limits(1000, 100000, 100, 100);
  auto a = t.Admit("p", b, 400);
  EXPECT_EQ(a->warning_percent, 0);
  auto c = t.Admit("p", b, 200);
  EXPECT_EQ(c->warning_percent, 50);
  auto d = t.Admit("p", b, 250);
  EXPECT_EQ(d->warning_percent, 80);
}

TEST(BudgetTrackerTest, ConcurrencyAndRatePerMinute) {
  FakeClock clock(kLateEvening - 3'600'000'000);
  BudgetTracker t(clock);
  auto b = Limits(1'000'000, 10'000'000, 3, 2);
  auto r1 = t.Admit("p", b, 1);
  auto r2 = t.Admit("p", b, 1);
  auto r3 = t.Admit("p", b, 1);
  ASSERT_TRUE(r1.ok() && r2.ok());
  EXPECT_EQ(ReasonOf(r3.status()), "rate_limited");  // 2 in flight
  t.Settle(*r1, 1);
  auto r4 = t.Admit("p", b, 1);
  ASSERT_TRUE(r4.ok());
  t.Settle(*r2, 1);
  t.Settle(*r4, 1);
  auto r5 = t.Admit("p", b, 1);  // 4th in the minute: over 3 per minute
  EXPECT_EQ(ReasonOf(r5.status()), "rate_limited");
  EXPECT_GT(RetryAfterMs(r5.status()), 0u);
  EXPECT_LE(RetryAfterMs(r5.status()), 60000u);
  clock.Advance(60'000'001);
  EXPECT_TRUE(t.Admit("p", b, 1).ok());
}

TEST(BudgetTrackerTest, DayBudgetResetsAtUtcMidnightAndRetryAfterSaysWhen) {
  FakeClock clock(kLateEvening);
  BudgetTracker t(clock);
  auto b = Limits(100, 100000, 100, 100);
  auto r = t.Admit("p", b, 100);
  ASSERT_TRUE(r.ok());
  auto refused = t.Admit("p", b, 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(RetryAfterMs(refused.status()), 60000u);  // one minute to midnight
  t.Settle(*r, 100);
  clock.Advance(61'000'000);  // past midnight
  EXPECT_TRUE(t.Admit("p", b, 100).ok());
  EXPECT_EQ(t.UsageOf("p").day_tokens, 100);
  EXPECT_EQ(t.UsageOf("p").month_tokens, 100);  // a new month too: Dec 1
}

}  // namespace
}  // namespace gantry::router
