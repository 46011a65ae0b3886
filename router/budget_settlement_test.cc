// What a request is charged for each way it can end, and when its concurrency slot is
// free again. The real gateway, budgets and broker over tcp (InProcessRouterForTest),
// HTTP clients, and a worker TEST DOUBLE that reports usage as a worker does (its own
// prompt count, each step's tokens, a running count in every PARTIAL) and answers a
// CANCEL late, or never. The charge is BudgetTracker::UsageOf("dev").day_tokens once
// in_flight is back to 0; while the request holds its slot, day_tokens is still the
// reservation (the router's prompt count + max_tokens).
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "router/fake_worker_for_test.h"
#include "router/http/test_http_client.h"
#include "router/in_process_router_for_test.h"

namespace gantry::router {
namespace {

using testing::FakeStep;
using testing::FakeWorkerForTest;
using testing::FakeWorkerOptions;

// What the worker says it evaluated; the router's own count of "hi" is another number.
constexpr uint32_t kWorkerPrompt = 37;
constexpr int64_t kMaxTokens = 500;
constexpr char kStreamed[] =
    R"({"model":"test-model","stream":true,"max_tokens":500,)"
    R"("messages":[{"role":"user","content":"hi"}]})";
// Without the word that asks for a stream: answered where the broker delivers.
constexpr char kWhole[] =
    R"({"model":"test-model","max_tokens":500,"messages":[{"role":"user","content":"hi"}]})";

class BudgetSettlementTest : public ::testing::Test {
 protected:
  void Start(std::vector<FakeStep> script, int cancel_delay_ms = 0,
             const std::string& policy = OneUserPolicyForTest()) {
    auto router = InProcessRouterForTest::Start(
        policy, {{"test-model", TinyModelEntryForTest("test-model")}});
    ASSERT_TRUE(router.ok()) << router.status();
    router_ = std::move(*router);
    FakeWorkerOptions w;
    w.endpoint = router_->broker()->endpoint();
    w.prompt_tokens = kWorkerPrompt;
    w.cancel_delay_ms = cancel_delay_ms;
    w.script = std::move(script);
    worker_ = std::make_unique<FakeWorkerForTest>(w);
    ASSERT_TRUE(worker_->WaitFor([&] { return router_->broker()->stats().live_workers == 1; },
                                 5000));
  }

  void TearDown() override {
    router_.reset();
    worker_.reset();
  }

  BudgetTracker::Usage Usage() const { return router_->budgets().UsageOf("dev"); }
  // The router's count of the prompt: the reservation's, and a lost worker's charge.
  uint32_t RouterPrompt() const { return worker_->requests().at(0).router_prompt_tokens(); }

  // Sends `body` as dev and reads the response; at the first chunk containing `marker`
  // runs `at`, which returns whether to read on (false: the client hangs up there).
  absl::StatusOr<http::TestResponse> Exchange(const char* body, absl::string_view marker,
                                              const std::function<bool()>& at) {
    auto client = http::TestHttpClient::Connect(router_->port());
    if (!client.ok()) return client.status();
    absl::Status sent = client->SendRequest(
        "POST", "/v1/chat/completions", body,
        {{"Content-Type", "application/json"}, {"Authorization", "Bearer k-dev"}});
    if (!sent.ok()) return sent;
    bool seen = false;
    auto response = client->ReadResponse(15000, [&](absl::string_view chunk) {
      if (seen || chunk.find(marker) == absl::string_view::npos) return true;
      seen = true;
      return at();
    });
    EXPECT_TRUE(seen) << "never saw " << marker;
    client->Close();
    return response;
  }

  // Until `over` says so (the worker's Terminal has left, or the worker is gone), the
  // request holds its slot and its whole reservation. Returns how often it looked.
  int ExpectHeldUntil(const std::function<bool()>& over) {
    const int64_t reserved = int64_t{RouterPrompt()} + kMaxTokens;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    int looks = 0;
    while (true) {
      if (std::chrono::steady_clock::now() > give_up) {
        ADD_FAILURE() << "still held after 20 s";
        return looks;
      }
      // Read before asking `over`: while it is false, nothing can have been settled.
      const BudgetTracker::Usage usage = Usage();
      if (over()) return looks;
      EXPECT_EQ(usage.in_flight, 1);
      EXPECT_EQ(usage.day_tokens, reserved);
      if (usage.in_flight != 1) return looks;
      ++looks;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  int ExpectHeldUntilTheWorkerAnswers() {
    EXPECT_TRUE(worker_->WaitFor([&] { return worker_->cancels_received().size() == 1; }, 5000));
    return ExpectHeldUntil([&] { return worker_->cancel_finals_sent() > 0; });
  }
  int ExpectHeldFor(int ms) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    return ExpectHeldUntil([until] { return std::chrono::steady_clock::now() >= until; });
  }

  // Waits for the slot to be free again; the tokens charged.
  int64_t Charged() {
    EXPECT_TRUE(worker_->WaitFor([&] { return Usage().in_flight == 0; }, 10000));
    return Usage().day_tokens;
  }

  // With requests_per_minute 2: two requests refused for their own reason (`refused`,
  // answered `status`), then one the policy allows is rate_limited, and none reached
  // the worker or holds a slot.
  void ExpectTwoRefusalsSpendTheRate(const std::string& refused, int status) {
    Start({FakeStep::Finish(v1::FINISH_STOP)}, 0,
          OneUserPolicyForTest("  budgets: {tokens_per_day: 1000000, tokens_per_month: "
                               "10000000, requests_per_minute: 2, concurrent_requests: 10}\n"));
    for (int i = 0; i < 2; ++i) {
      auto response = http::TestHttpClient::PostJson(router_->port(), "/v1/chat/completions",
                                                      refused, "k-dev");
      ASSERT_TRUE(response.ok());
      EXPECT_EQ(response->status, status) << response->body;
    }
    auto allowed = http::TestHttpClient::PostJson(router_->port(), "/v1/chat/completions",
                                                   kWhole, "k-dev");
    ASSERT_TRUE(allowed.ok());
    EXPECT_EQ(allowed->status, 429) << allowed->body;
    EXPECT_TRUE(absl::StrContains(allowed->body, R"("code":"rate_limited")")) << allowed->body;
    EXPECT_EQ(Usage().in_flight, 0);
    EXPECT_TRUE(worker_->requests().empty());
  }

  std::unique_ptr<InProcessRouterForTest> router_;
  std::unique_ptr<FakeWorkerForTest> worker_;
};

TEST_F(BudgetSettlementTest, FinishedNormallyIsChargedWhatTheWorkerReported) {
  Start({FakeStep::Text("one").Costing(2), FakeStep::Gate(), FakeStep::Text(" two").Costing(3),
         FakeStep::Finish(v1::FINISH_STOP)});
  auto response = Exchange(kStreamed, "one", [&] {
    EXPECT_GT(ExpectHeldFor(200), 5);  // the worker holds its FINAL at the gate
    worker_->OpenGate();
    return true;
  });
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_TRUE(absl::StrContains(response->body, "[DONE]")) << response->body;
  EXPECT_EQ(Charged(), kWorkerPrompt + 5);
}

// Before this was built, the broker's own cancelled Terminal carried no usage and the
// router charged its prompt count plus one token per delta.
TEST_F(BudgetSettlementTest, ClientHangingUpMidStreamIsChargedWhatTheWorkerDid) {
  Start({FakeStep::Text("one").Costing(2), FakeStep::Text(" two").Costing(3), FakeStep::Hang()},
        /*cancel_delay_ms=*/300);
  auto response = Exchange(kStreamed, " two", [] { return false; });
  EXPECT_GT(ExpectHeldUntilTheWorkerAnswers(), 10);
  EXPECT_EQ(Charged(), kWorkerPrompt + 5);
}

// The prompt was evaluated; nothing was generated. Before, this was free.
TEST_F(BudgetSettlementTest, ClientHangingUpDuringThePrefillIsChargedThePrompt) {
  Start({FakeStep::Sleep(60000), FakeStep::Text("late"), FakeStep::Finish(v1::FINISH_STOP)},
        /*cancel_delay_ms=*/300);
  {
    auto client = http::TestHttpClient::Connect(router_->port());
    ASSERT_TRUE(client.ok());
    ASSERT_TRUE(client->SendRequest("POST", "/v1/chat/completions", kWhole,
                                    {{"Content-Type", "application/json"},
                                     {"Authorization", "Bearer k-dev"}})
                    .ok());
    ASSERT_TRUE(worker_->WaitFor([&] { return worker_->active_requests() == 1; }, 5000));
  }  // hangs up before any output
  EXPECT_GT(ExpectHeldUntilTheWorkerAnswers(), 10);
  EXPECT_EQ(Charged(), kWorkerPrompt);
}

// Gateway::CancelOwned is what the gRPC Cancel call runs. The client still gets its
// answer (cancelled), once the worker has stopped.
TEST_F(BudgetSettlementTest, ClientCancelIsChargedWhatTheWorkerDid) {
  // One delta that cost the worker 12 tokens (a long word, or text after a long think).
  Start({FakeStep::Text("one").Costing(12), FakeStep::Hang()}, /*cancel_delay_ms=*/300);
  std::chrono::steady_clock::time_point answered;
  auto response = Exchange(kStreamed, "one", [&] {
    EXPECT_TRUE(router_->gateway()->CancelOwned("dev", worker_->requests().at(0).request_id(),
                                                "cancelled by the client (gRPC Cancel)"));
    EXPECT_GT(ExpectHeldUntilTheWorkerAnswers(), 10);
    answered = std::chrono::steady_clock::now();
    return true;
  });
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_LT(std::chrono::steady_clock::now() - answered, std::chrono::seconds(2));
  EXPECT_TRUE(absl::StrContains(response->body, R"("code":"cancelled")")) << response->body;
  EXPECT_EQ(Charged(), kWorkerPrompt + 12);  // the worker's count, not one per event
}

TEST_F(BudgetSettlementTest, DeadlineExceededIsChargedWhatTheWorkerDid) {
  Start({FakeStep::Text("one").Costing(2), FakeStep::Hang()}, /*cancel_delay_ms=*/300,
        OneUserPolicyForTest("  budgets: {tokens_per_day: 1000000, tokens_per_month: 10000000, "
                             "requests_per_minute: 1000, concurrent_requests: 10, "
                             "request_seconds: 1}\n"));
  auto response = Exchange(kStreamed, "one", [&] {
    EXPECT_GT(ExpectHeldUntilTheWorkerAnswers(), 10);  // the CANCEL comes at the deadline
    return true;
  });
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_TRUE(absl::StrContains(response->body, R"("code":"deadline_exceeded")"))
      << response->body;
  EXPECT_EQ(Charged(), kWorkerPrompt + 2);
}

// No FINAL will come: the router's prompt count and the worker's last running count.
TEST_F(BudgetSettlementTest, WorkerLostIsChargedThePromptAndTheTokensCounted) {
  Start({FakeStep::Reasoning("hmm").Costing(4), FakeStep::Text(" two").Costing(3),
         FakeStep::Hang()});
  auto response = Exchange(kStreamed, " two", [&] {
    worker_->Kill();
    EXPECT_GT(ExpectHeldUntil([&] { return router_->broker()->stats().live_workers == 0; }), 0);
    return true;
  });
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_TRUE(absl::StrContains(response->body, R"("code":"worker_lost")")) << response->body;
  EXPECT_EQ(Charged(), int64_t{RouterPrompt()} + 7);
}

// A worker that never answers the CANCEL holds the slot for the broker's
// cancel_ack_timeout (liveness x heartbeat interval: 3 s here), then is treated as lost
// for the request.
TEST_F(BudgetSettlementTest, CancelNeverAnsweredIsChargedWhatTheRouterKnowsAfterTheTimeout) {
  Start({FakeStep::Text("one").Costing(2), FakeStep::Hang()}, /*cancel_delay_ms=*/-1);
  const auto start = std::chrono::steady_clock::now();
  auto response = Exchange(kStreamed, "one", [] { return false; });
  EXPECT_TRUE(worker_->WaitFor([&] { return worker_->cancels_received().size() >= 1; }, 5000));
  EXPECT_GT(ExpectHeldUntil([&] { return router_->broker()->stats().cancels_unanswered > 0; }),
            100);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(2900));
  EXPECT_EQ(worker_->cancel_finals_sent(), 0);
  EXPECT_EQ(Charged(), int64_t{RouterPrompt()} + 2);
}

// The rates are charged before the prompt is rendered: prompts too long for the
// context (4,096 tokens) are refused, found without counting all of them, and each
// used a place in the minute's window, so the third is rate_limited without being
// rendered. None holds a slot or tokens afterwards, and no worker saw one.
TEST_F(BudgetSettlementTest, RatesAreChargedBeforeThePromptIsRendered) {
  Start({FakeStep::Finish(v1::FINISH_STOP)}, 0,
        OneUserPolicyForTest("  budgets: {tokens_per_day: 1000000, tokens_per_month: 10000000, "
                             "requests_per_minute: 2, concurrent_requests: 10}\n"));
  const std::string body = absl::StrCat(
      R"({"model":"test-model","messages":[{"role":"user","content":")",
      std::string(1 << 20, 'a'), std::string(64 << 10, ' '), R"("}]})");
  for (int i = 0; i < 3; ++i) {
    auto response = http::TestHttpClient::PostJson(router_->port(), "/v1/chat/completions",
                                                    body, "k-dev");
    ASSERT_TRUE(response.ok()) << response.status();
    if (i < 2) {
      EXPECT_EQ(response->status, 400) << response->body;
      EXPECT_TRUE(absl::StrContains(response->body, R"("code":"context_length_exceeded")"));
      EXPECT_TRUE(absl::StrContains(
          response->body, "the prompt has more than 4096 tokens; the model's context is 4096"))
          << response->body;
    } else {
      EXPECT_EQ(response->status, 429) << response->body;
      EXPECT_TRUE(absl::StrContains(response->body, R"("code":"rate_limited")"))
          << response->body;
    }
  }
  EXPECT_EQ(Usage().in_flight, 0);
  EXPECT_EQ(Usage().day_tokens, 0);
  EXPECT_TRUE(worker_->requests().empty());
}

// A request the policy denies spends its principal's rate too (a red team sent 92,289
// denied requests in 30 s on a key of 10 a minute).
TEST_F(BudgetSettlementTest, DenialsSpendTheRate) {
  ExpectTwoRefusalsSpendTheRate(
      R"({"model":"not-granted","messages":[{"role":"user","content":"hi"}]})", 403);
}

// So does a request refused for its names, before the policy reads them (a red team
// sent 37,355 of them in 10 s on a key of 10 a minute).
TEST_F(BudgetSettlementTest, RequestsRefusedForTheirNamesSpendTheRate) {
  ExpectTwoRefusalsSpendTheRate(
      absl::StrCat(R"({"model":")", std::string(300, 'm'),
                   R"(","messages":[{"role":"user","content":"hi"}]})"),
      400);
}

}  // namespace
}  // namespace gantry::router
