// What a request is charged when it ends without the worker's own usage: the client
// closed the connection mid-stream (the broker's cancelled Terminal carries no usage).
// Real gateway, budgets and broker over tcp; a worker TEST DOUBLE streams three deltas
// and then holds the request until it is cancelled.
#include <memory>
#include <string>

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

TEST(BudgetSettlement, ClosingTheConnectionDoesNotMakeTheOutputFree) {
  const std::string policy = OneUserPolicyForTest();
  auto router = InProcessRouterForTest::Start(policy, {{"test-model", TinyModelEntryForTest("test-model")}});
  ASSERT_TRUE(router.ok()) << router.status();
  FakeWorkerOptions w;
  w.endpoint = (*router)->broker()->endpoint();
  w.model = "test-model";
  w.script = {FakeStep::Text("one"), FakeStep::Text(" two"), FakeStep::Text(" three"), FakeStep::Hang()};
  FakeWorkerForTest worker(w);
  ASSERT_TRUE(worker.WaitFor([&] { return (*router)->broker()->stats().live_workers == 1; }, 5000));

  auto client = http::TestHttpClient::Connect((*router)->port());
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(client->SendRequest("POST", "/v1/chat/completions",
                                  R"({"model":"test-model","stream":true,"max_tokens":500,)"
                                  R"("messages":[{"role":"user","content":"hi"}]})",
                                  {{"Content-Type", "application/json"}, {"Authorization", "Bearer k-dev"}})
                  .ok());
  int chunks = 0;
  auto partial = client->ReadResponse(10000, [&](absl::string_view chunk) {
    if (chunk.find("three") != absl::string_view::npos) return false;  // stop reading
    ++chunks;
    return true;
  });
  client->Close();
  ASSERT_TRUE(worker.WaitFor([&] { return worker.cancels_received().size() == 1; }, 5000));
  ASSERT_TRUE(worker.WaitFor([&] { return (*router)->budgets().UsageOf("dev").in_flight == 0; }, 5000));
  const BudgetTracker::Usage usage = (*router)->budgets().UsageOf("dev");
  const uint32_t prompt = worker.requests().at(0).router_prompt_tokens();
  ASSERT_GT(prompt, 0u);
  // The prompt and the three deltas the client received; not 0, not the whole 500.
  EXPECT_EQ(usage.day_tokens, int64_t{prompt} + 3);
}

}  // namespace
}  // namespace gantry::router
