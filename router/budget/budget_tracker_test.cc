#include "router/budget/budget_tracker.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "common/status.h"
#include "policy/policy_loader.h"

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

// The gateway charges the rates before it renders a prompt (Begin) and reserves its
// tokens once they are counted (Reserve): a request refused in between still used its
// place in the minute's window, and gives back its slot in flight when settled.
TEST(BudgetTrackerTest, BeginChargesTheRatesAndReserveTheTokens) {
  FakeClock clock(kLateEvening - 3'600'000'000);
  BudgetTracker t(clock);
  auto b = Limits(1000, 100000, 2, 1);
  auto first = t.Begin("p", b);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(t.UsageOf("p").in_flight, 1);
  EXPECT_EQ(t.UsageOf("p").day_tokens, 0);
  EXPECT_EQ(ReasonOf(t.Begin("p", b).status()), "rate_limited");  // one in flight
  t.Settle(*first, 0);  // refused after Begin (its prompt was too long): nothing charged
  EXPECT_EQ(t.UsageOf("p").in_flight, 0);
  auto second = t.Begin("p", b);
  ASSERT_TRUE(second.ok());
  absl::Status over = t.Reserve(b, 1001, &*second);
  EXPECT_EQ(ReasonOf(over), "budget_exhausted");
  EXPECT_EQ(second->tokens, 0);
  EXPECT_EQ(t.UsageOf("p").day_tokens, 0);
  ASSERT_TRUE(t.Reserve(b, 600, &*second).ok());
  EXPECT_EQ(second->warning_percent, 50);
  EXPECT_EQ(t.UsageOf("p").day_tokens, 600);
  t.Settle(*second, 10);
  EXPECT_EQ(t.UsageOf("p").day_tokens, 10);
  EXPECT_EQ(t.UsageOf("p").in_flight, 0);
  // Two Begins in this minute, whatever became of them: a third is over 2 per minute.
  auto third = t.Begin("p", b);
  EXPECT_EQ(ReasonOf(third.status()), "rate_limited");
  // Admit (both steps) refused for its tokens also spent a place.
  clock.Advance(60'000'001);
  EXPECT_EQ(ReasonOf(t.Admit("p", b, 5000).status()), "budget_exhausted");
  EXPECT_EQ(t.UsageOf("p").in_flight, 0);
  EXPECT_TRUE(t.Admit("p", b, 1).ok());
  EXPECT_EQ(ReasonOf(t.Begin("p", Limits(1000, 100000, 2, 5)).status()), "rate_limited");
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

constexpr int64_t kUnlimited = policy::kUnlimited;

TEST(BudgetTrackerTest, ZeroRefusesEveryRequestInItsDimension) {
  FakeClock clock(kLateEvening);  // 2026-11-30 23:59:00 UTC: a minute to a new day and month
  struct Case {
    policy::Budgets budgets;
    const char* reason;
    uint32_t retry_after_ms;
    const char* says;
  } cases[] = {
      {Limits(kUnlimited, kUnlimited, kUnlimited, 0), "rate_limited", 60000,
       "no concurrent requests (concurrent_requests: 0)"},
      {Limits(kUnlimited, kUnlimited, 0, kUnlimited), "rate_limited", 60000,
       "no requests per minute (requests_per_minute: 0)"},
      {Limits(0, kUnlimited, kUnlimited, kUnlimited), "budget_exhausted", 60000,
       "no tokens per day (tokens_per_day: 0)"},
      {Limits(kUnlimited, 0, kUnlimited, kUnlimited), "budget_exhausted", 60000,
       "no tokens per month (tokens_per_month: 0)"},
  };
  for (const Case& c : cases) {
    BudgetTracker t(clock);
    // Even a request that reserves nothing, and even the first one.
    for (int64_t reserve : {int64_t{0}, int64_t{1}, int64_t{1000}}) {
      auto r = t.Admit("zed", c.budgets, reserve);
      ASSERT_FALSE(r.ok()) << c.says;
      EXPECT_EQ(ReasonOf(r.status()), c.reason) << c.says;
      EXPECT_EQ(RetryAfterMs(r.status()), c.retry_after_ms) << c.says;
      EXPECT_NE(r.status().message().find(c.says), absl::string_view::npos) << r.status();
    }
    EXPECT_EQ(t.UsageOf("zed").in_flight, 0);
    EXPECT_EQ(t.UsageOf("zed").day_tokens, 0);
  }
  // Mid-month, a month budget of 0 says the first of the next month; a day budget of 0
  // the next midnight.
  FakeClock mid(kLateEvening - 15 * 86'400'000'000);  // 2026-11-15 23:59:00
  BudgetTracker t(mid);
  auto month = t.Admit("zed", Limits(kUnlimited, 0, kUnlimited, kUnlimited), 1);
  EXPECT_EQ(RetryAfterMs(month.status()), 60000u + 15u * 86'400'000u);
  auto day = t.Admit("zed", Limits(0, kUnlimited, kUnlimited, kUnlimited), 1);
  EXPECT_EQ(RetryAfterMs(day.status()), 60000u);
}

TEST(BudgetTrackerTest, UnlimitedNeverRefusesItsDimension) {
  FakeClock clock(kLateEvening - 3'600'000'000);
  BudgetTracker t(clock);
  const auto b = Limits(kUnlimited, kUnlimited, kUnlimited, kUnlimited);
  std::vector<BudgetReservation> held;
  for (int i = 0; i < 2000; ++i) {  // 2000 in flight, all in one minute
    auto r = t.Admit("ada", b, int64_t{1} << 40);
    ASSERT_TRUE(r.ok()) << i << ": " << r.status();
    EXPECT_EQ(r->warning_percent, 0);  // no share of an unlimited budget
    held.push_back(*r);
  }
  EXPECT_EQ(t.UsageOf("ada").in_flight, 2000);
  EXPECT_EQ(t.UsageOf("ada").day_tokens, int64_t{2000} << 40);  // still counted
  for (const BudgetReservation& r : held) t.Settle(r, 10);
  EXPECT_EQ(t.UsageOf("ada").day_tokens, 20000);
  EXPECT_EQ(t.LocalCounts().at("ada").minute_admissions, 2000);

  // One unlimited dimension leaves the others enforced exactly: N admits N, then refuses.
  const auto two_per_minute = Limits(kUnlimited, kUnlimited, 2, kUnlimited);
  EXPECT_TRUE(t.Admit("bo", two_per_minute, 1).ok());
  EXPECT_TRUE(t.Admit("bo", two_per_minute, 1).ok());
  EXPECT_EQ(ReasonOf(t.Admit("bo", two_per_minute, 1).status()), "rate_limited");
  const auto month_only = Limits(kUnlimited, 100, kUnlimited, kUnlimited);
  EXPECT_TRUE(t.Admit("cy", month_only, 100).ok());
  auto over = t.Admit("cy", month_only, 1);
  EXPECT_EQ(ReasonOf(over.status()), "budget_exhausted");
  EXPECT_NE(over.status().message().find("100 tokens this month"), absl::string_view::npos);
}

TEST(BudgetTrackerTest, WarningsOnlyForANumberedDayBudget) {
  FakeClock clock(kLateEvening - 3'600'000'000);
  BudgetTracker t(clock);
  // A day budget of 1: the first token is all of it (80 percent crossed at once).
  auto one = t.Admit("p", Limits(1, kUnlimited, kUnlimited, kUnlimited), 1);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->warning_percent, 80);
  // The month budget has no warnings; an unlimited day has none however much is used.
  auto month = t.Admit("q", Limits(kUnlimited, 10, kUnlimited, kUnlimited), 9);
  ASSERT_TRUE(month.ok());
  EXPECT_EQ(month->warning_percent, 0);
}

// The budgets a policy's defaults and grants give each principal, through the real
// loader and compiler, enforced by the tracker.
TEST(BudgetTrackerTest, DefaultsAndGrantsCombineByMinimumWithZeroAndUnlimited) {
  std::string users;
  for (const char* name : {"ann", "ben", "cat", "dee"}) {
    absl::StrAppend(&users, "    - {name: ", name, ", key_sha256: ", Sha256Hex(name),
                    ", priority: interactive, groups: [g]}\n");
  }
  const std::string yaml = absl::StrCat(
      "version: 1\n"
      "defaults:\n"
      "  budgets: {tokens_per_day: unlimited, tokens_per_month: 5000, requests_per_minute: 3,"
      " concurrent_requests: unlimited}\n"
      "models:\n  - {name: m, bundles: [b]}\n"
      "principals:\n  groups:\n    - {name: g}\n  users:\n", users,
      "grants:\n"
      // Every member: unlimited lowers nothing.
      "  - {group: g, models: {m: {}}, budgets: {requests_per_minute: unlimited}}\n"
      // ann: unlimited (default) and 100 give 100; 0 and unlimited give 0.
      "  - {user: ann, budgets: {tokens_per_day: 100, concurrent_requests: 0}}\n"
      // ben: a grant cannot lift the default 5000 to unlimited, and 0 wins over 2.
      "  - {user: ben, budgets: {tokens_per_month: unlimited, requests_per_minute: 0}}\n"
      "  - {user: ben, budgets: {requests_per_minute: 2}}\n"
      // cat: a day budget of 0.
      "  - {user: cat, budgets: {tokens_per_day: 0}}\n");
  auto snap = policy::LoadPolicyText(yaml, "budgets.yaml");
  ASSERT_TRUE(snap.ok()) << snap.status();
  auto budgets_of = [&](const std::string& name) {
    return (*snap)->principals[(*snap)->by_name.at(name)].budgets;
  };
  const policy::Budgets ann = budgets_of("ann"), ben = budgets_of("ben"),
                        cat = budgets_of("cat"), dee = budgets_of("dee");
  EXPECT_EQ(ann.tokens_per_day, 100);
  EXPECT_EQ(ann.tokens_per_month, 5000);
  EXPECT_EQ(ann.requests_per_minute, 3);
  EXPECT_EQ(ann.concurrent_requests, 0);
  EXPECT_EQ(ben.tokens_per_day, kUnlimited);
  EXPECT_EQ(ben.tokens_per_month, 5000);
  EXPECT_EQ(ben.requests_per_minute, 0);
  EXPECT_EQ(ben.concurrent_requests, kUnlimited);
  EXPECT_EQ(cat.tokens_per_day, 0);
  EXPECT_EQ(dee.tokens_per_day, kUnlimited);
  EXPECT_EQ(dee.tokens_per_month, 5000);
  EXPECT_EQ(dee.requests_per_minute, 3);
  EXPECT_EQ(dee.concurrent_requests, kUnlimited);
  EXPECT_EQ(dee.request_seconds, policy::kDefaultRequestSeconds);

  FakeClock clock(kLateEvening - 3'600'000'000);
  BudgetTracker t(clock);
  EXPECT_EQ(ReasonOf(t.Admit("ann", ann, 1).status()), "rate_limited");
  EXPECT_EQ(ReasonOf(t.Admit("ben", ben, 1).status()), "rate_limited");
  EXPECT_EQ(ReasonOf(t.Admit("cat", cat, 1).status()), "budget_exhausted");
  // dee: no concurrency limit, 3 per minute, 5000 tokens a month, any number a day.
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(t.Admit("dee", dee, 1000).ok()) << i;
  EXPECT_EQ(ReasonOf(t.Admit("dee", dee, 1).status()), "rate_limited");
  clock.Advance(60'000'001);
  EXPECT_TRUE(t.Admit("dee", dee, 2000).ok());
  EXPECT_EQ(ReasonOf(t.Admit("dee", dee, 1).status()), "budget_exhausted");  // 5000 used
}

}  // namespace
}  // namespace gantry::router
