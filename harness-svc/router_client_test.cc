// The harness's reading of the router's streamed replies: the stream is produced by
// the router's own renderer (router/openai/chat_response.h), then split into HTTP
// chunks at every byte boundary to exercise the incremental decoder.
#include "harness-svc/router_client.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "gtest/gtest.h"
#include "harness-svc/http_client.h"
#include "router/openai/chat_response.h"

namespace gantry::harness {
namespace {

v1::StreamEvent Text(const std::string& text) {
  v1::StreamEvent e;
  e.mutable_text()->set_text(text);
  return e;
}

v1::StreamEvent ToolCall(uint32_t index, const std::string& id, const std::string& name,
                         const std::string& args) {
  v1::StreamEvent e;
  e.mutable_tool_call()->set_index(index);
  e.mutable_tool_call()->mutable_call()->set_id(id);
  e.mutable_tool_call()->mutable_call()->set_name(name);
  e.mutable_tool_call()->mutable_call()->set_arguments_json(args);
  return e;
}

v1::StreamEvent Final(v1::FinishReason reason) {
  v1::StreamEvent e;
  e.mutable_terminal()->set_finish_reason(reason);
  e.mutable_terminal()->mutable_status()->set_code("OK");
  e.mutable_terminal()->mutable_usage()->set_prompt_tokens(321);
  e.mutable_terminal()->mutable_usage()->set_completion_tokens(12);
  e.mutable_terminal()->mutable_usage()->set_prompt_ids_sha256(std::string(64, 'a'));
  return e;
}

// What the router sends for `events`, with include_usage.
std::string RouterStream(const std::vector<v1::StreamEvent>& events) {
  openai::ChatStreamRenderer renderer({"chatcmpl-1", "gantry-demo", 1}, true);
  std::string out;
  for (const auto& e : events) out += renderer.OnEvent(e);
  return out;
}

TEST(ChatStreamTest, TextToolCallsFinishAndUsage) {
  const std::string body =
      RouterStream({Text("Let me "), Text("look."), ToolCall(0, "call_a", "read_file", R"({"path":"a"})"),
                    ToolCall(1, "call_b", "list_dir", R"({"path":""})"), Final(v1::FINISH_TOOL_CALLS)});
  auto r = ParseChatStream(body);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->content, "Let me look.");
  EXPECT_EQ(r->finish_reason, "tool_calls");
  ASSERT_EQ(r->tool_calls.size(), 2u);
  EXPECT_EQ(r->tool_calls[0].id, "call_a");
  EXPECT_EQ(r->tool_calls[0].name, "read_file");
  EXPECT_EQ(r->tool_calls[0].arguments_json, R"({"path":"a"})");
  EXPECT_EQ(r->tool_calls[1].name, "list_dir");
  EXPECT_TRUE(r->usage_known);
  EXPECT_EQ(r->prompt_tokens, 321);
  EXPECT_EQ(r->completion_tokens, 12);
  EXPECT_EQ(r->prompt_ids_sha256, std::string(64, 'a'));  // the router's usage extension
}

TEST(ChatStreamTest, TheFirstTokenIsTheFirstDeltaWithContent) {
  const std::string body = RouterStream({Text("hi"), Final(v1::FINISH_STOP)});
  std::vector<std::string> events = absl::StrSplit(body, "\n\n", absl::SkipEmpty());
  ASSERT_GE(events.size(), 4u);                  // role, text, finish, usage, [DONE]
  EXPECT_FALSE(IsFirstTokenEvent(events[0]));    // the role chunk has empty content
  EXPECT_TRUE(IsFirstTokenEvent(events[1]));
  EXPECT_FALSE(IsFirstTokenEvent(events[2]));    // finish_reason only
  EXPECT_FALSE(IsFirstTokenEvent("data: [DONE]"));
  EXPECT_FALSE(IsFirstTokenEvent("data: {not json"));
  const std::string calls = RouterStream({ToolCall(0, "call_a", "read_file", "{}"), Final(v1::FINISH_TOOL_CALLS)});
  std::vector<std::string> call_events = absl::StrSplit(calls, "\n\n", absl::SkipEmpty());
  EXPECT_TRUE(IsFirstTokenEvent(call_events[1]));
}

TEST(ChatStreamTest, IncompleteOrFailedStreamsAreErrors) {
  const std::string body = RouterStream({Text("partial"), Final(v1::FINISH_STOP)});
  auto cut = ParseChatStream(body.substr(0, body.find("data: [DONE]")));
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("[DONE]"), std::string::npos) << cut.status();
  v1::StreamEvent failed;
  failed.mutable_terminal()->set_finish_reason(v1::FINISH_ERROR);
  failed.mutable_terminal()->mutable_status()->set_code("RESOURCE_EXHAUSTED");
  failed.mutable_terminal()->mutable_status()->set_reason("queue_full");
  failed.mutable_terminal()->mutable_status()->set_message("busy");
  auto err = ParseChatStream(RouterStream({Text("x"), failed}));
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(ReasonOf(err.status()), "queue_full") << err.status();
  EXPECT_FALSE(ParseChatStream("data: {\"choices\": 3}\n\ndata: [DONE]\n\n").ok());
  EXPECT_FALSE(ParseChatStream("data: {\"choices\": [{\"delta\": {\"tool_calls\": [{\"index\": 0}]}}]}\n\n"
                               "data: [DONE]\n\n").ok());  // a call without id and name
}

}  // namespace
}  // namespace gantry::harness
