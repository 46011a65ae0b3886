// Tools a request advertises that the principal is not granted, under each of the
// policy's defaults.advertised_tools modes, through the real gateway (HTTP server,
// policy, broker over tcp) to a worker TEST DOUBLE that records what it was sent.
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "router/fake_worker_for_test.h"
#include "router/http/test_http_client.h"
#include "router/in_process_router_for_test.h"

namespace gantry::router {
namespace {

using testing::FakeWorkerForTest;
using testing::FakeWorkerOptions;

std::string Policy(const std::string& mode) {
  return OneUserPolicyForTest(
      absl::StrCat("  budgets: {tokens_per_day: 1000000, tokens_per_month: 10000000, "
                   "requests_per_minute: 1000, concurrent_requests: 10}\n  advertised_tools: ",
                   mode, "\n"),
      "  - user: dev\n    models:\n      test-model: {}\n    tools:\n      read_file: {}\n"
      "      list_dir: {}\n  - user: dev\n    deny:\n      tools: [list_dir]\n");
}

class AdvertisedToolsTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    auto router = InProcessRouterForTest::Start(Policy(GetParam()),
                                                {{"test-model", TinyModelEntryForTest("test-model")}});
    ASSERT_TRUE(router.ok()) << router.status();
    router_ = std::move(*router);
    FakeWorkerOptions w;
    w.endpoint = router_->broker()->endpoint();
    w.model = "test-model";
    worker_ = std::make_unique<FakeWorkerForTest>(w);
    ASSERT_TRUE(worker_->WaitFor([&] { return router_->broker()->stats().live_workers == 1; }, 5000));
  }

  http::TestResponse Post(const std::string& extra) {
    auto client = http::TestHttpClient::Connect(router_->port());
    EXPECT_TRUE(client.ok());
    const std::string body = absl::StrCat(
        R"({"model":"test-model","messages":[{"role":"user","content":"hi"}],"tools":[)",
        R"({"type":"function","function":{"name":"read_file","parameters":{"type":"object"}}},)",
        R"({"type":"function","function":{"name":"list_dir","parameters":{"type":"object"}}},)",
        R"({"type":"function","function":{"name":"run_shell","parameters":{"type":"object"}}}])",
        extra, "}");
    EXPECT_TRUE(client->SendRequest("POST", "/v1/chat/completions", body,
                                    {{"Content-Type", "application/json"},
                                     {"Authorization", "Bearer k-dev"}})
                    .ok());
    auto response = client->ReadResponse(10000);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : http::TestResponse{};
  }

  std::unique_ptr<InProcessRouterForTest> router_;
  std::unique_ptr<FakeWorkerForTest> worker_;
};

TEST_P(AdvertisedToolsTest, UngrantedToolsFollowThePolicy) {
  const std::string mode = GetParam();
  http::TestResponse r = Post("");
  if (mode == "strip") {
    ASSERT_EQ(r.status, 200) << r.body;
    ASSERT_EQ(worker_->requests().size(), 1u);
    // list_dir is granted and then denied; run_shell is never granted.
    ASSERT_EQ(worker_->requests()[0].tools_size(), 1);
    EXPECT_EQ(worker_->requests()[0].tools(0).name(), "read_file");
    EXPECT_EQ(r.Header("x-gantry-tools-stripped"), "list_dir,run_shell");
    // Naming a stripped tool in tool_choice cannot be honoured: refused.
    http::TestResponse named =
        Post(R"(,"tool_choice":{"type":"function","function":{"name":"run_shell"}})");
    EXPECT_EQ(named.status, 403) << named.body;
    EXPECT_TRUE(absl::StrContains(named.body, R"("code":"policy_denied")"));
  } else {
    EXPECT_EQ(r.status, 403) << r.body;
    EXPECT_TRUE(absl::StrContains(r.body, R"("code":"policy_denied")"));
    EXPECT_TRUE(absl::StrContains(r.body, "grants[1].deny.tools[0]")) << r.body;
    EXPECT_EQ(worker_->requests().size(), 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, AdvertisedToolsTest, ::testing::Values("strip", "reject"));

}  // namespace
}  // namespace gantry::router
