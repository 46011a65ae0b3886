#include "router/request_evidence.h"

#include <random>
#include <vector>

#include "common/sha256.h"
#include "gtest/gtest.h"

namespace gantry::router {
namespace {

v1::InferenceRequest TurnTwo() {
  v1::InferenceRequest req;
  req.set_model("m");
  req.set_max_tokens(64);
  req.add_tools()->set_name("read");
  req.add_tools()->set_name("glob");
  v1::ChatMessage* call = req.add_messages();
  call->set_role("assistant");
  call->add_tool_calls()->set_id("call_a");
  v1::ChatMessage* result = req.add_messages();
  result->set_role("tool");
  result->set_tool_call_id("call_a");
  return req;
}

TEST(PromptIdsSha256Hex, EqualsTokenIdsSha256Hex) {
  std::mt19937 rng(7);
  for (size_t n : {0, 1, 2, 15, 16, 17, 463, 5000}) {
    std::vector<int32_t> ids(n);
    for (int32_t& id : ids) id = static_cast<int32_t>(rng());  // negative ones too
    EXPECT_EQ(PromptIdsSha256Hex(ids), TokenIdsSha256Hex(ids)) << n;
  }
}

TEST(RequestEvidence, RecordsTheRequestTheStreamAndTheTerminal) {
  RenderedPrompt rendered{7, "ab", "<prompt>"};
  RequestEvidence evidence(TurnTwo(), rendered, "responses", "QwenCode/0.24.4 (linux; x64)",
                           1000000);
  v1::StreamEvent text, call;
  text.mutable_text()->set_text("x");
  call.mutable_tool_call()->mutable_call()->set_id("call_b");
  call.mutable_tool_call()->mutable_call()->set_name("glob");
  evidence.Observe(text, 1002500);  // 2.5 ms after receipt
  evidence.Observe(call, 1004000);
  v1::Terminal terminal;
  terminal.set_finish_reason(v1::FINISH_TOOL_CALLS);
  terminal.mutable_usage()->set_prompt_tokens(7);
  terminal.mutable_usage()->set_prompt_ids_sha256("ab");
  json::Value r = evidence.Finish(terminal, "bundle", 1005000);
  EXPECT_EQ(r.Find("client")->Find("name")->as_string(), "QwenCode");
  EXPECT_EQ(r.Find("client")->Find("version")->as_string(), "0.24.4");
  EXPECT_EQ(r.Find("api")->as_string(), "responses");
  EXPECT_EQ(r.Find("tools")->items().size(), 2u);
  EXPECT_EQ(r.Find("max_output_tokens")->as_int64(), 64);
  EXPECT_EQ(r.Find("tool_results")->items()[0].as_string(), "call_a");
  EXPECT_EQ(r.Find("rendered_prompt")->as_string(), "<prompt>");
  EXPECT_EQ(r.Find("tool_calls")->items()[0].Find("id")->as_string(), "call_b");
  EXPECT_DOUBLE_EQ(r.Find("timings")->Find("first_output_ms")->as_double(), 2.5);
  EXPECT_DOUBLE_EQ(r.Find("timings")->Find("tool_call_complete_ms")->as_double(), 4.0);
  EXPECT_DOUBLE_EQ(r.Find("timings")->Find("finished_ms")->as_double(), 5.0);
  EXPECT_EQ(r.Find("bundle_sha256")->as_string(), "bundle");  // none in the terminal
  EXPECT_EQ(r.Find("worker_prompt_token_ids_sha256")->as_string(), "ab");
  EXPECT_EQ(r.Find("outcome")->as_string(), "tool_calls");
}

TEST(RequestEvidence, FirstTurnKeepsOnlyThePromptHashAndErrorsNameTheirReason) {
  v1::InferenceRequest req;
  req.set_model("m");
  req.add_messages()->set_role("user");
  RequestEvidence evidence(req, {3, "cd", "<p>"}, "chat.completions", "", 0);
  v1::Terminal lost;
  lost.set_finish_reason(v1::FINISH_ERROR);
  lost.mutable_status()->set_code("UNAVAILABLE");
  lost.mutable_status()->set_reason("worker_lost");
  json::Value r = evidence.Finish(lost, "", 10);
  EXPECT_EQ(r.Find("rendered_prompt"), nullptr);
  EXPECT_EQ(r.Find("rendered_prompt_sha256")->as_string().size(), 64u);
  EXPECT_EQ(r.Find("client")->Find("name")->as_string(), "");  // no User-Agent
  EXPECT_TRUE(r.Find("timings")->Find("first_output_ms")->is_null());
  EXPECT_TRUE(r.Find("timings")->Find("tool_call_complete_ms")->is_null());
  EXPECT_EQ(r.Find("outcome")->as_string(), "worker_lost");
}

// The User-Agent is kept to 256 bytes, cut on a character boundary (the header may be
// 64 KiB, and the record is written for every admitted request).
TEST(RequestEvidence, AUserAgentIsKeptToItsFirst256Bytes) {
  v1::InferenceRequest req;
  req.set_model("m");
  const std::string agent = "Client/1.0 " + std::string(244, 'x') + "\xC3\xA9" + "tail";
  ASSERT_EQ(agent.substr(0, 256).back(), '\xC3');  // the cut falls inside the é
  RequestEvidence evidence(req, {3, "cd", "<p>"}, "chat.completions", agent, 0);
  v1::Terminal done;
  done.set_finish_reason(v1::FINISH_STOP);
  json::Value r = evidence.Finish(done, "", 10);
  EXPECT_EQ(r.Find("user_agent")->as_string(), agent.substr(0, 255));
  EXPECT_EQ(r.Find("client")->Find("name")->as_string(), "Client");
}

// What a request's record keeps of its tool results is bounded (a red team had 26 rows
// of 12.3 MB each written from ids): the first 256 result ids with the count of the rest,
// and the first 256 KiB of the rendered prompt with its full size.
TEST(RequestEvidence, ToolResultsAndTheRenderedPromptAreBounded) {
  v1::InferenceRequest req;
  req.set_model("m");
  for (int i = 0; i < 300; ++i) {
    v1::ChatMessage* m = req.add_messages();
    m->set_role("tool");
    m->set_tool_call_id(absl::StrCat("call_", i));
  }
  const std::string text(300u << 10, 'p');
  RequestEvidence evidence(req, {3, "cd", text}, "chat.completions", "", 0);
  v1::Terminal done;
  done.set_finish_reason(v1::FINISH_STOP);
  json::Value r = evidence.Finish(done, "", 10);
  EXPECT_EQ(r.Find("tool_results")->items().size(), 256u);
  EXPECT_EQ(r.Find("tool_results")->items()[255].as_string(), "call_255");
  EXPECT_EQ(*r.Find("tool_results_not_listed")->as_int64(), 44);
  EXPECT_EQ(r.Find("rendered_prompt")->as_string().size(), 256u << 10);
  EXPECT_EQ(*r.Find("rendered_prompt_bytes")->as_int64(), 300 << 10);
  EXPECT_EQ(r.Find("rendered_prompt_sha256")->as_string(), Sha256Hex(text));
}

}  // namespace
}  // namespace gantry::router
