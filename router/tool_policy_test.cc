// The router as the one enforcement point for tools and parameters (issue 16), through
// the real HTTP server, policy engine, gateway and broker over tcp, to the worker TEST
// DOUBLE (router/fake_worker_for_test.h) scripted to emit the calls a model might:
//   - offered tools the principal is not granted are stripped (the default) or refused;
//   - every tool call the model emits is decided before it leaves the router, streamed
//     and not, in both OpenAI APIs: a denied call never reaches the client, the request
//     ends with one tool_call_denied error naming the rule;
//   - omitted parameters are decided as the values the worker will use, and sent.
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

using testing::FakeStep;
using testing::FakeWorkerForTest;

constexpr char kGrants[] =
    "  - user: dev\n"
    "    models:\n"
    "      test-model:\n"
    "        parallel_tool_calls: {allowed: false, action: clamp}\n"
    "        top_k: {max: 40, action: clamp}\n"
    "        stop_strings: {max: 1, action: clamp}\n"
    "    tools:\n"
    "      read_file: {args: {path: {globs: [\"/workspace/**\"]}}}\n"
    "      list_dir: {}\n"
    "      write_file: {}\n"
    "  - user: dev\n"
    "    deny:\n"
    "      tools: [write_file]\n";

class ToolPolicyTest : public ::testing::Test {
 protected:
  void Start(const std::string& advertised_tools) {
    std::string defaults;
    if (!advertised_tools.empty()) {
      defaults = absl::StrCat(
          "  budgets: {tokens_per_day: 1000000, tokens_per_month: 10000000, "
          "requests_per_minute: 1000, concurrent_requests: 10}\n  advertised_tools: ",
          advertised_tools, "\n");
    }
    auto router = InProcessRouterForTest::Start(OneUserPolicyForTest(defaults, kGrants),
                                                {{"test-model", TinyModelEntryForTest("test-model")}});
    ASSERT_TRUE(router.ok()) << router.status();
    router_ = std::move(*router);
    worker_ = router_->StartWorker();
    ASSERT_NE(worker_, nullptr);
  }
  void SetUp() override { Start(""); }

  http::TestResponse Post(const std::string& extra, const std::string& path = "/v1/chat/completions") {
    const bool responses = path == "/v1/responses";
    const std::string tool =
        responses ? R"({"type":"function","name":"read_file","parameters":{"type":"object"}})"
                  : R"({"type":"function","function":{"name":"read_file","parameters":{"type":"object"}}})";
    const std::string body =
        responses ? absl::StrCat(R"({"model":"test-model","input":"hi","tools":[)", tool, "]", extra, "}")
                  : absl::StrCat(R"({"model":"test-model","messages":[{"role":"user","content":"hi"}],"tools":[)",
                                 tool, "]", extra, "}");
    auto response = http::TestHttpClient::PostJson(router_->port(), path, body, "k-dev");
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : http::TestResponse{};
  }

  void ModelCalls(std::vector<FakeStep> calls) {
    std::vector<FakeStep> script = {FakeStep::Text("Let me look.")};
    for (FakeStep& c : calls) script.push_back(std::move(c));
    script.push_back(FakeStep::Finish(v1::FINISH_TOOL_CALLS));
    worker_->SetScript(std::move(script));
  }

  std::unique_ptr<InProcessRouterForTest> router_;
  std::unique_ptr<FakeWorkerForTest> worker_;
};

// Before: defaults.advertised_tools defaulted to allow and the offered tools were never
// decided: write_file, denied to dev, reached the model.
TEST_F(ToolPolicyTest, OfferedToolsAreDecidedAndUngrantedOnesStrippedByDefault) {
  const std::string body =
      R"({"model":"test-model","messages":[{"role":"user","content":"hi"}],"tools":[)"
      R"({"type":"function","function":{"name":"read_file","parameters":{"type":"object"}}},)"
      R"({"type":"function","function":{"name":"write_file","parameters":{"type":"object"}}},)"
      R"({"type":"function","function":{"name":"Read_File","parameters":{"type":"object"}}}]})";
  auto r = http::TestHttpClient::PostJson(router_->port(), "/v1/chat/completions", body, "k-dev");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->Header("x-gantry-tools-stripped"), "write_file,Read_File");
  ASSERT_EQ(worker_->requests().size(), 1u);
  ASSERT_EQ(worker_->requests()[0].tools_size(), 1);
  EXPECT_EQ(worker_->requests()[0].tools(0).name(), "read_file");
}

// The Responses object echoes the tools the model was offered, without the stripped.
TEST_F(ToolPolicyTest, ResponsesEchoesOnlyTheOfferedTools) {
  http::TestResponse r = Post(
      R"(,"tools":[{"type":"function","name":"read_file"},{"type":"function","name":"write_file"}])",
      "/v1/responses");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Header("x-gantry-tools-stripped"), "write_file");
  EXPECT_TRUE(absl::StrContains(r.body, R"("name":"read_file")")) << r.body;
  EXPECT_FALSE(absl::StrContains(r.body, "write_file")) << r.body;
}

TEST_F(ToolPolicyTest, DuplicateOfferedToolIsRefused) {
  http::TestResponse r = Post(
      R"(,"tool_choice":"auto","tools":[{"type":"function","function":{"name":"list_dir"}},{"type":"function","function":{"name":"list_dir"}}])");
  // The body's second "tools" key: the JSON parser keeps the last, which offers list_dir
  // twice: a malformed request.
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_TRUE(absl::StrContains(r.body, "duplicate tool 'list_dir'")) << r.body;
  EXPECT_EQ(worker_->requests().size(), 0u);
}

class ToolPolicyRejectTest : public ToolPolicyTest {
 protected:
  void SetUp() override { Start("reject"); }
};

TEST_F(ToolPolicyRejectTest, UnderRejectTheRequestIsRefusedNamingTheRule) {
  http::TestResponse r = Post(R"(,"tools":[{"type":"function","function":{"name":"write_file"}}])");
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_TRUE(absl::StrContains(r.body, "grants[1].deny.tools[0]")) << r.body;
  EXPECT_TRUE(absl::StrContains(r.body, "write_file")) << r.body;
  EXPECT_EQ(worker_->requests().size(), 0u);
  EXPECT_EQ(Post("").status, 200);  // read_file is granted
}

// Before: a model's call went to the client unchecked: read_file /etc/shadow reached it.
TEST_F(ToolPolicyTest, DeniedCallNeverReachesTheClientNonStreamed) {
  ModelCalls({FakeStep::ToolCall("read_file", R"({"path":"/etc/shadow"})")});
  http::TestResponse r = Post("");
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_TRUE(absl::StrContains(r.body, R"("code":"tool_call_denied")")) << r.body;
  EXPECT_TRUE(absl::StrContains(r.body, "grants[0].tools.read_file.args.path")) << r.body;
  EXPECT_FALSE(absl::StrContains(r.body, "shadow")) << r.body;
  // The work it caused stops on the worker.
  EXPECT_TRUE(worker_->WaitFor([&] { return router_->broker()->stats().in_flight == 0; }, 5000));
}

TEST_F(ToolPolicyTest, DeniedCallNeverReachesTheClientStreamed) {
  // An allowed call first, then a denied one in the same turn: neither goes out.
  ModelCalls({FakeStep::ToolCall("read_file", R"({"path":"/workspace/a.c"})"),
              FakeStep::ToolCall("read_file", R"({"path":"/workspace/../etc/shadow"})")});
  http::TestResponse r = Post(R"(,"stream":true)");
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(absl::StrContains(r.body, "Let me look.")) << r.body;
  EXPECT_TRUE(absl::StrContains(r.body, R"("code":"tool_call_denied")")) << r.body;
  EXPECT_FALSE(absl::StrContains(r.body, "tool_calls")) << r.body;
  EXPECT_FALSE(absl::StrContains(r.body, "[DONE]")) << r.body;
  EXPECT_FALSE(absl::StrContains(r.body, "shadow")) << r.body;
}

TEST_F(ToolPolicyTest, DeniedCallInTheResponsesApi) {
  ModelCalls({FakeStep::ToolCall("write_file", R"({"path":"/workspace/a"})")});
  http::TestResponse whole = Post("", "/v1/responses");
  EXPECT_EQ(whole.status, 403) << whole.body;
  EXPECT_TRUE(absl::StrContains(whole.body, "grants[1].deny.tools[0]")) << whole.body;
  http::TestResponse streamed = Post(R"(,"stream":true)", "/v1/responses");
  EXPECT_EQ(streamed.status, 200);
  EXPECT_TRUE(absl::StrContains(streamed.body, "tool_call_denied")) << streamed.body;
  EXPECT_FALSE(absl::StrContains(streamed.body, "function_call\"")) << streamed.body;
}

TEST_F(ToolPolicyTest, MalformedAndConfusableCallsAreDenied) {
  for (const auto& [name, args] : std::vector<std::pair<std::string, std::string>>{
           {"read_file", R"({"path":"/workspace/a","path":"/etc/shadow"})"},
           {"read_file", R"({"path":["/workspace/a"]})"},
           {"read_file", R"({})"},
           {"list_dir", R"(["/workspace"])"},
           {"Read_File", R"({"path":"/workspace/a"})"},
           {"read_f\xd1\x96le", R"({"path":"/workspace/a"})"}}) {
    ModelCalls({FakeStep::ToolCall(name, args)});
    http::TestResponse r = Post("");
    EXPECT_EQ(r.status, 403) << name << " " << args << ": " << r.body;
    EXPECT_TRUE(absl::StrContains(r.body, "tool_call_denied")) << r.body;
  }
}

// A granted tool the request did not offer (list_dir here): a real worker refuses such a
// call, so only a faulty or rogue one (this TEST DOUBLE) sends it; it is not passed on.
TEST_F(ToolPolicyTest, ACallOfAToolNotOfferedIsDenied) {
  ModelCalls({FakeStep::ToolCall("list_dir", R"({"path":"/workspace"})")});
  http::TestResponse r = Post("");
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_TRUE(absl::StrContains(r.body, "rule request (tool_not_offered)")) << r.body;
}

TEST_F(ToolPolicyTest, AllowedCallsGoOutInOrder) {
  ModelCalls({FakeStep::ToolCall("read_file", R"({"path":"/workspace/a.c"})"),
              FakeStep::ToolCall("list_dir", R"({"path":"/"})")});
  const std::string both =
      R"(,"tools":[{"type":"function","function":{"name":"read_file"}},{"type":"function","function":{"name":"list_dir"}}])";
  http::TestResponse whole = Post(both);
  ASSERT_EQ(whole.status, 200) << whole.body;
  const size_t a = whole.body.find("/workspace/a.c");
  const size_t b = whole.body.find("list_dir");
  ASSERT_NE(a, std::string::npos) << whole.body;
  ASSERT_NE(b, std::string::npos) << whole.body;
  EXPECT_LT(a, b);
  http::TestResponse streamed = Post(both + R"(,"stream":true)");
  EXPECT_TRUE(absl::StrContains(streamed.body, "list_dir")) << streamed.body;
  EXPECT_TRUE(absl::StrContains(streamed.body, "[DONE]")) << streamed.body;
}

// Before: an omitted parallel_tool_calls was not checked and the worker took it as true.
TEST_F(ToolPolicyTest, OmittedParametersAreDecidedAsUsedAndSent) {
  http::TestResponse r = Post("");
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(worker_->requests().size(), 1u);
  const v1::InferenceRequest& sent = worker_->requests()[0];
  ASSERT_TRUE(sent.has_parallel_tool_calls());
  EXPECT_FALSE(sent.parallel_tool_calls());
  EXPECT_EQ(sent.sampling().top_k(), 40u);  // omitted = off = every token: clamped
  ASSERT_TRUE(sent.sampling().has_temperature());
  EXPECT_EQ(sent.sampling().temperature(), 0.0f);
  EXPECT_EQ(r.Header("x-gantry-policy-rule"), "grants[0].models.test-model.top_k");  // the first clamp
}

// Before: a clamped stop_strings was decided (verdict clamp, applied 1) and every stop
// string still went to the worker (found by //tests/integration:explain_enforce_test).
TEST_F(ToolPolicyTest, ClampedStopStringsAreCutToTheBound) {
  http::TestResponse r = Post(R"(,"stop":["END","STOP","HALT"])");
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(worker_->requests().size(), 1u);
  ASSERT_EQ(worker_->requests()[0].stop_size(), 1);
  EXPECT_EQ(worker_->requests()[0].stop(0), "END");
}

// A seed the policy does not bound reaches the worker bit for bit (it was once carried
// through a double: -1, which the parser wraps to 2^64-1, became 0).
TEST_F(ToolPolicyTest, UnboundedSeedsPassUnchanged) {
  ASSERT_EQ(Post(R"(,"seed":-1)").status, 200);
  ASSERT_EQ(Post(R"(,"seed":1152921504606846977)").status, 200);
  ASSERT_EQ(worker_->requests().size(), 2u);
  EXPECT_EQ(worker_->requests()[0].sampling().seed(), UINT64_MAX);
  EXPECT_EQ(worker_->requests()[1].sampling().seed(), 1152921504606846977ull);
}

TEST_F(ToolPolicyTest, TemplateKwargsNeedAGrant) {
  http::TestResponse r = Post(R"(,"chat_template_kwargs":{"enable_thinking":false})");
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_TRUE(absl::StrContains(r.body, "parameter_not_granted")) << r.body;
  r = Post(R"(,"chat_template_kwargs":{"custom":1})");
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_TRUE(absl::StrContains(r.body, "template_kwarg_not_granted")) << r.body;
  r = Post(R"(,"chat_template_kwargs":{"enable_thinking":"no"})");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.Header("x-gantry-request-id"), "");  // refused after the decision was recorded
  EXPECT_EQ(worker_->requests().size(), 0u);
}

}  // namespace
}  // namespace gantry::router
