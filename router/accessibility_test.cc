// Accessibility clients over HTTP, through the whole in-process router (real policy
// engine, tiny tokenizer, HTTP server, broker over tcp) to the worker TEST DOUBLE:
// the `: admitted` comment before any token, sentence-sized text in both streaming
// APIs (reasoning and tool calls as they were), and queued accessibility work ahead of
// batch work.
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "gtest/gtest.h"
#include "router/fake_worker_for_test.h"
#include "router/http/test_http_client.h"
#include "router/in_process_router_for_test.h"

namespace gantry::router {
namespace {

using testing::FakeStep;
using testing::FakeWorkerForTest;
using testing::FakeWorkerOptions;

constexpr char kModel[] = "test-model";

class AccessibilityTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(2); }

  void Start(uint32_t slots) {
    worker_.reset();
    router_.reset();
    std::map<std::string, ModelEntry> models;
    models[kModel] = TinyModelEntryForTest(kModel);
    auto router = InProcessRouterForTest::Start(FourPrincipalsPolicyForTest({kModel}), models);
    ASSERT_TRUE(router.ok()) << router.status();
    router_ = std::move(*router);
    FakeWorkerOptions w;
    w.endpoint = router_->broker()->endpoint();
    w.model = kModel;
    w.slots = slots;
    w.script = {FakeStep::Gate(), FakeStep::Text("Hel"), FakeStep::Text("lo there."),
                FakeStep::Text(" How"), FakeStep::Text(" are you?"),
                FakeStep::Finish(v1::FINISH_STOP)};
    worker_ = std::make_unique<FakeWorkerForTest>(w);
    ASSERT_TRUE(worker_->WaitFor([&] { return router_->broker()->stats().live_workers == 1; },
                                 5000));
  }

  // A streamed request; `on_chunk` sees the body as it arrives. Returns the body.
  std::string Stream(const std::string& key, const std::string& path,
                     const std::function<void(absl::string_view)>& on_chunk = nullptr,
                     const std::string& extra = "") {
    auto client = http::TestHttpClient::Connect(router_->port());
    EXPECT_TRUE(client.ok());
    const bool responses = path == "/v1/responses";
    std::string body = responses
        ? absl::StrCat(R"({"model":")", kModel, R"(","stream":true,"input":"hi"})")
        : absl::StrCat(R"({"model":")", kModel,
                       R"(","stream":true,"messages":[{"role":"user","content":"hi"}])", extra, "}");
    EXPECT_TRUE(client->SendRequest("POST", path, body,
                                    {{"Authorization", "Bearer " + key},
                                     {"Content-Type", "application/json"}}).ok());
    auto response = client->ReadResponse(20000, [&](absl::string_view chunk) {
      if (on_chunk) on_chunk(chunk);
      return true;
    });
    EXPECT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->status, 200) << response->body;
    return response->body;
  }

  // The text deltas of a chat-completions stream (`field` of each delta), in order.
  static std::vector<std::string> Deltas(const std::string& body, const char* field) {
    std::vector<std::string> out;
    for (const std::string& line : http::SseDataLines(body)) {
      auto chunk = json::Parse(line);
      if (!chunk.ok()) continue;  // [DONE]
      const json::Value* choices = chunk->Find("choices");
      if (choices == nullptr) {  // a Responses event
        const json::Value* type = chunk->Find("type");
        if (type == nullptr || !type->is_string()) continue;  // an error event
        if (type->as_string() == field) out.push_back(chunk->Find("delta")->as_string());
        continue;
      }
      for (const json::Value& choice : choices->items()) {
        const json::Value* text = choice.Find("delta")->Find(field);
        if (text != nullptr && text->is_string() && !text->as_string().empty()) {
          out.push_back(text->as_string());
        }
      }
    }
    return out;
  }

  // Opens the worker's gate once the stream says the request was admitted: the
  // stream would stall (and the test time out) if the comment waited for a token.
  std::function<void(absl::string_view)> OpenGateOnAdmitted() {
    return [this](absl::string_view chunk) {
      if (absl::StrContains(chunk, ": admitted req_")) worker_->OpenGate();
    };
  }

  std::unique_ptr<InProcessRouterForTest> router_;
  std::unique_ptr<FakeWorkerForTest> worker_;
};

const std::vector<std::string> kSentences = {"Hello there. ", "How are you?"};

TEST_F(AccessibilityTest, ChatCompletionsAdmittedBeforeAnyTokenThenSentences) {
  std::string body = Stream("k-ada", "/v1/chat/completions", OpenGateOnAdmitted());
  EXPECT_LT(body.find(": admitted req_"), body.find("data: "));
  EXPECT_EQ(Deltas(body, "content"), kSentences);
  EXPECT_TRUE(absl::StrContains(body, "data: [DONE]"));
}

TEST_F(AccessibilityTest, ResponsesAdmittedBeforeAnyTokenThenSentences) {
  std::string body = Stream("k-ada", "/v1/responses", OpenGateOnAdmitted());
  EXPECT_LT(body.find(": admitted req_"), body.find("event: response.created"));
  EXPECT_EQ(Deltas(body, "response.output_text.delta"), kSentences);
  EXPECT_TRUE(absl::StrContains(body, "event: response.completed"));
}

TEST_F(AccessibilityTest, OtherPrincipalsStreamTokensAsTheyCome) {
  worker_->OpenGate();
  std::string body = Stream("k-dev", "/v1/chat/completions");
  EXPECT_FALSE(absl::StrContains(body, ": admitted"));
  EXPECT_EQ(Deltas(body, "content"),
            (std::vector<std::string>{"Hel", "lo there.", " How", " are you?"}));
}

TEST_F(AccessibilityTest, ReasoningAndToolCallsAreNotRegrouped) {
  worker_->OpenGate();
  worker_->SetScript({FakeStep::Reasoning("a"), FakeStep::Reasoning("b"),
                      FakeStep::Text("Let me"), FakeStep::Text(" look"),
                      FakeStep::ToolCall("read_file", R"({"path":"a"})"),
                      FakeStep::Finish(v1::FINISH_TOOL_CALLS)});
  std::string body = Stream("k-ada", "/v1/chat/completions", nullptr,
                            R"(,"tools":[{"type":"function","function":{"name":"read_file"}}])");
  EXPECT_EQ(Deltas(body, "reasoning_content"), (std::vector<std::string>{"a", "b"}));
  // The open sentence is released before the call, in order.
  EXPECT_EQ(Deltas(body, "content"), (std::vector<std::string>{"Let me look"}));
  EXPECT_LT(body.find("Let me look"), body.find(R"("name":"read_file")"));
  EXPECT_TRUE(absl::StrContains(body, R"("finish_reason":"tool_calls")"));
}

TEST_F(AccessibilityTest, AnOpenSentenceIsReleasedWhenTheModelPauses) {
  worker_->OpenGate();
  // 3 s of silence mid-sentence, three times the hold: the words so far are spoken, the
  // word that may still grow ("is") waits for the rest.
  worker_->SetScript({FakeStep::Text("Hello there, this"), FakeStep::Text(" is"),
                      FakeStep::Sleep(3000), FakeStep::Text(" the end."),
                      FakeStep::Finish(v1::FINISH_STOP)});
  std::string body = Stream("k-ada", "/v1/chat/completions");
  EXPECT_EQ(Deltas(body, "content"),
            (std::vector<std::string>{"Hello there, this ", "is the end."}));
  // Without a pause it stays one sentence.
  worker_->SetScript({FakeStep::Text("Hello there, this"), FakeStep::Text(" is"),
                      FakeStep::Text(" the end."), FakeStep::Finish(v1::FINISH_STOP)});
  body = Stream("k-ada", "/v1/chat/completions");
  EXPECT_EQ(Deltas(body, "content"), (std::vector<std::string>{"Hello there, this is the end."}));
}

TEST_F(AccessibilityTest, QueuedAccessibilityWorkGoesAheadOfBatch) {
  Start(/*slots=*/1);
  broker::Broker* broker = router_->broker();
  std::vector<std::thread> clients;
  auto send = [&](const std::string& key) {
    clients.emplace_back([this, key] { Stream(key, "/v1/chat/completions"); });
  };
  send("k-dev");  // takes the only slot and waits at the gate
  ASSERT_TRUE(worker_->WaitFor([&] { return worker_->requests_received() == 1; }, 5000));
  send("k-nightly");  // batch, queued first
  ASSERT_TRUE(worker_->WaitFor([&] { return broker->stats().queued == 1; }, 5000));
  send("k-ada");  // accessibility, queued second
  ASSERT_TRUE(worker_->WaitFor([&] { return broker->stats().queued == 2; }, 5000));
  worker_->OpenGate();
  for (auto& t : clients) t.join();
  std::vector<std::string> order;
  for (const auto& r : worker_->requests()) order.push_back(r.principal());
  EXPECT_EQ(order, (std::vector<std::string>{"dev", "ada", "nightly"}));
}

}  // namespace
}  // namespace gantry::router
