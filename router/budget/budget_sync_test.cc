// Two (and three) routers' budget trackers sharing one real PostgreSQL database (the one
// tests/run starts: GANTRY_TEST_PG_URL) through BudgetSync. Exchanges are driven with
// SyncOnce() (no background thread) so that every step is deterministic.
#include "router/budget/budget_sync.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "common/clock.h"
#include "common/status.h"
#include "ledger/pg_test_util.h"

namespace gantry::router {
namespace {

policy::Budgets Limits(int64_t day, int64_t rpm, int64_t concurrent) {
  policy::Budgets b;
  b.tokens_per_day = day;
  b.tokens_per_month = day * 30;
  b.requests_per_minute = rpm;
  b.concurrent_requests = concurrent;
  return b;
}

class BudgetSyncTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(ledger::TestServerUrlForTest().empty())
        << "GANTRY_TEST_PG_URL is not set: run the tests through tests/run, which starts "
           "PostgreSQL";
    url_ = ledger::CreateTestDatabaseForTest();
  }

  std::unique_ptr<BudgetSync> Sync(BudgetTracker* tracker, int live_after_ms = 5000) {
    BudgetSyncOptions options;
    options.database_url = url_;
    options.interval_ms = 0;  // SyncOnce() only
    options.live_after_ms = live_after_ms;
    auto sync = BudgetSync::Start(tracker, options);
    EXPECT_TRUE(sync.ok()) << sync.status();
    return sync.ok() ? std::move(*sync) : nullptr;
  }

  std::string url_;
};

TEST_F(BudgetSyncTest, TokensReservedOnOneRouterCountOnTheOther) {
  BudgetTracker a, b;
  auto sa = Sync(&a), sb = Sync(&b);
  ASSERT_NE(sa->router_id(), sb->router_id());
  const auto limits = Limits(1000, 100, 10);
  auto reserved = a.Admit("dana", limits, 600);
  ASSERT_TRUE(reserved.ok());
  // Before any exchange router B knows nothing: it would admit 600 more.
  ASSERT_TRUE(sa->SyncOnce().ok());
  ASSERT_TRUE(sb->SyncOnce().ok());
  auto refused = b.Admit("dana", limits, 600);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(ReasonOf(refused.status()), "budget_exhausted");
  EXPECT_NE(refused.status().message().find("used 600 of 1000"), std::string::npos)
      << refused.status().message();
  auto fits = b.Admit("dana", limits, 300);
  ASSERT_TRUE(fits.ok());
  // A settles short: after the next exchange B sees 100 + its own 300.
  a.Settle(*reserved, 100);
  ASSERT_TRUE(sa->SyncOnce().ok());
  ASSERT_TRUE(sb->SyncOnce().ok());
  EXPECT_TRUE(b.Admit("dana", limits, 600).ok());                 // 100 + 300 + 600
  EXPECT_FALSE(b.Admit("dana", limits, 1).ok());                  // 1000 reached
  EXPECT_TRUE(b.Admit("someone-else", limits, 1000).ok());        // per principal
  EXPECT_EQ(sa->failures() + sb->failures(), 0);
}

TEST_F(BudgetSyncTest, ConcurrencyAndRateAreShared) {
  BudgetTracker a, b;
  auto sa = Sync(&a), sb = Sync(&b);
  const auto limits = Limits(1'000'000, 3, 2);
  auto r1 = a.Admit("p", limits, 1);
  auto r2 = a.Admit("p", limits, 1);
  ASSERT_TRUE(r1.ok() && r2.ok());
  ASSERT_TRUE(sa->SyncOnce().ok());
  ASSERT_TRUE(sb->SyncOnce().ok());
  auto busy = b.Admit("p", limits, 1);  // 2 in flight on A
  EXPECT_EQ(ReasonOf(busy.status()), "rate_limited");
  a.Settle(*r1, 1);
  a.Settle(*r2, 1);
  ASSERT_TRUE(sa->SyncOnce().ok());
  ASSERT_TRUE(sb->SyncOnce().ok());
  auto third = b.Admit("p", limits, 1);  // 2 admissions on A this minute + this one
  ASSERT_TRUE(third.ok()) << third.status();
  b.Settle(*third, 1);
  auto fourth = b.Admit("p", limits, 1);  // the 4th in the minute across both routers
  EXPECT_EQ(ReasonOf(fourth.status()), "rate_limited");
  EXPECT_GT(RetryAfterMs(fourth.status()), 0u);
}

TEST_F(BudgetSyncTest, ABudgetSurvivesARouterButItsSlotsDoNot) {
  const auto limits = Limits(1000, 100, 1);
  BudgetTracker fresh;
  auto s_fresh = Sync(&fresh, /*live_after_ms=*/300);
  {
    BudgetTracker gone;
    auto s_gone = Sync(&gone);
    ASSERT_TRUE(gone.Admit("p", limits, 700).ok());  // never settled: the router dies
    ASSERT_TRUE(s_gone->SyncOnce().ok());
    s_gone.release();  // a crash: no clean goodbye (the object leaks on purpose)
  }
  ASSERT_TRUE(s_fresh->SyncOnce().ok());
  // The dead router's slot still counts while its row is fresh...
  EXPECT_EQ(ReasonOf(fresh.Admit("p", limits, 1).status()), "rate_limited");
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  ASSERT_TRUE(s_fresh->SyncOnce().ok());
  // ...then only its tokens do: the day's 700 stay spent.
  auto over = fresh.Admit("p", limits, 400);
  EXPECT_EQ(ReasonOf(over.status()), "budget_exhausted");
  EXPECT_TRUE(fresh.Admit("p", limits, 300).ok());
}

TEST_F(BudgetSyncTest, ACleanStopFreesItsSlotsAtOnce) {
  const auto limits = Limits(1000, 100, 1);
  BudgetTracker a, b;
  auto sb = Sync(&b);
  {
    auto sa = Sync(&a);
    ASSERT_TRUE(a.Admit("p", limits, 10).ok());
    ASSERT_TRUE(sa->SyncOnce().ok());
    ASSERT_TRUE(sb->SyncOnce().ok());
    EXPECT_EQ(ReasonOf(b.Admit("p", limits, 1).status()), "rate_limited");
  }  // A stops cleanly
  ASSERT_TRUE(sb->SyncOnce().ok());
  EXPECT_TRUE(b.Admit("p", limits, 1).ok());
}

TEST_F(BudgetSyncTest, AnUnreachableDatabaseIsRetriedAndLocalLimitsHold) {
  BudgetTracker t;
  BudgetSyncOptions options;
  options.database_url = "postgresql://postgres@127.0.0.1:1/none?connect_timeout=2";
  options.interval_ms = 0;
  auto sync = BudgetSync::Start(&t, options);
  ASSERT_TRUE(sync.ok()) << sync.status();  // not an error at start: retried
  absl::Status s = (*sync)->SyncOnce();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_EQ((*sync)->failures(), 1);
  const auto limits = Limits(100, 100, 10);
  EXPECT_TRUE(t.Admit("p", limits, 100).ok());
  EXPECT_FALSE(t.Admit("p", limits, 1).ok());  // its own counts still enforced

  options.database_url = "";
  EXPECT_EQ(BudgetSync::Start(&t, options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(BudgetSyncTest, TheBackgroundThreadExchanges) {
  BudgetTracker a, b;
  BudgetSyncOptions options;
  options.database_url = url_;
  options.interval_ms = 20;
  auto sa = BudgetSync::Start(&a, options);
  auto sb = BudgetSync::Start(&b, options);
  ASSERT_TRUE(sa.ok() && sb.ok());
  const auto limits = Limits(1000, 100, 10);
  ASSERT_TRUE(a.Admit("p", limits, 900).ok());
  // Within a few exchanges B refuses what no longer fits (no timing asserted: waits
  // up to 10 s for the state, not for a speed).
  bool refused = false;
  for (int i = 0; i < 500 && !refused; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    auto r = b.Admit("p", limits, 200);
    refused = !r.ok();
    if (r.ok()) b.Settle(*r, 0);  // B's own count stays 0: only A's 900 can refuse
  }
  EXPECT_TRUE(refused);
  EXPECT_GT((*sb)->exchanges(), 0);
}

}  // namespace
}  // namespace gantry::router
