// Budgets mean what they say, through the real gateway (HTTP server, policy loader and
// compiler, budget tracker, broker over tcp) to a worker TEST DOUBLE: a grant that sets
// a budget to 0 refuses the chat request with 429 and the budget's code before any
// worker sees it, and `unlimited` spelled out admits.
#include <memory>
#include <ostream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "router/fake_worker_for_test.h"
#include "router/http/test_http_client.h"
#include "router/in_process_router_for_test.h"

namespace gantry::router {
namespace {

using testing::FakeWorkerForTest;

struct Case {
  const char* name;
  const char* defaults;       // the defaults' budgets mapping
  const char* grant_budgets;  // dev's grant's budgets mapping
  int status;
  const char* code;  // "" for admitted
  int min_retry_after_s, max_retry_after_s;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

constexpr char kRoomy[] =
    "{tokens_per_day: 1000000, tokens_per_month: 10000000, requests_per_minute: 1000, "
    "concurrent_requests: 10}";
constexpr char kUnlimitedAll[] =
    "{tokens_per_day: unlimited, tokens_per_month: unlimited, requests_per_minute: unlimited, "
    "concurrent_requests: unlimited}";

const Case kCases[] = {
    {"rpm_zero", kRoomy, "{requests_per_minute: 0}", 429, "rate_limited", 60, 60},
    {"concurrent_zero", kRoomy, "{concurrent_requests: 0}", 429, "rate_limited", 60, 60},
    // Until the next UTC midnight / first of the month: at most a day / 31 days.
    {"day_zero", kRoomy, "{tokens_per_day: 0}", 429, "budget_exhausted", 1, 86400},
    {"month_zero", kRoomy, "{tokens_per_month: 0}", 429, "budget_exhausted", 1, 31 * 86400},
    // 0 in the defaults, and a grant's unlimited cannot lift it.
    {"default_zero_grant_unlimited",
     "{tokens_per_day: 0, tokens_per_month: unlimited, requests_per_minute: unlimited, "
     "concurrent_requests: unlimited}",
     "{tokens_per_day: unlimited}", 429, "budget_exhausted", 1, 86400},
    {"unlimited", kUnlimitedAll, "{tokens_per_day: unlimited, requests_per_minute: unlimited}",
     200, "", 0, 0},
    // unlimited defaults narrowed by a grant's number: that number holds (2 per minute
    // admits the requests below, which are 2).
    {"unlimited_then_two", kUnlimitedAll, "{requests_per_minute: 2}", 200, "", 0, 0},
};

class BudgetZeroTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const Case& c = GetParam();
    const std::string policy = OneUserPolicyForTest(
        absl::StrCat("  budgets: ", c.defaults, "\n"),
        absl::StrCat("  - user: dev\n    models:\n      test-model: {}\n    budgets: ",
                     c.grant_budgets, "\n"));
    auto router = InProcessRouterForTest::Start(
        policy, {{"test-model", TinyModelEntryForTest("test-model")}});
    ASSERT_TRUE(router.ok()) << router.status();
    router_ = std::move(*router);
    worker_ = router_->StartWorker();
    ASSERT_NE(worker_, nullptr);
  }

  http::TestResponse Chat() {
    auto response = http::TestHttpClient::PostJson(
        router_->port(), "/v1/chat/completions",
        R"({"model":"test-model","max_tokens":20,"messages":[{"role":"user","content":"hi"}]})",
        "k-dev");
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : http::TestResponse{};
  }

  std::unique_ptr<InProcessRouterForTest> router_;
  std::unique_ptr<FakeWorkerForTest> worker_;
};

TEST_P(BudgetZeroTest, ChatIsRefusedOrAdmittedAsTheBudgetSays) {
  const Case& c = GetParam();
  for (int i = 0; i < 2; ++i) {  // the second request too: 0 never frees, unlimited never fills
    http::TestResponse r = Chat();
    ASSERT_EQ(r.status, c.status) << i << ": " << r.body;
    if (c.status == 429) {
      EXPECT_TRUE(absl::StrContains(r.body, absl::StrCat(R"("code":")", c.code, R"(")")))
          << r.body;
      int retry_after = 0;
      ASSERT_TRUE(absl::SimpleAtoi(r.Header("retry-after"), &retry_after)) << r.Header("retry-after");
      EXPECT_GE(retry_after, c.min_retry_after_s);
      EXPECT_LE(retry_after, c.max_retry_after_s);
    }
  }
  // A refused request never reaches a worker; admitted ones all do.
  EXPECT_EQ(worker_->requests().size(), c.status == 200 ? 2u : 0u);
  // Admitted requests settle (a moment after the answer may reach the client).
  EXPECT_TRUE(worker_->WaitFor([&] { return router_->budgets().UsageOf("dev").in_flight == 0; },
                               5000));
}

INSTANTIATE_TEST_SUITE_P(Budgets, BudgetZeroTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace gantry::router
