// Validation of calls against the request: tool_choice, parallel_tool_calls,
// max_tool_calls, ids, and what Create refuses before any generation.
#include "worker/toolcall/tool_call_stream.h"

#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "worker/toolcall/test_events.h"

namespace gantry::toolcall {
namespace {

using toolcall_testing::ClientTools;
using toolcall_testing::ExpectSplitInvariant;
using toolcall_testing::RunText;
using V = std::vector<std::string>;

constexpr ToolProtocol kHermes = ToolProtocol::kHermesJson;

std::string Call(const std::string& name, const std::string& arguments) {
  return "<tool_call>{\"name\": \"" + name + "\", \"arguments\": " + arguments + "}</tool_call>";
}

const std::string kTwoCalls =
    Call("read", R"({"filePath": "a"})") + "\n" + Call("glob", R"({"pattern": "*"})");

ToolCallPolicy Policy(v1::ToolChoiceMode mode, const std::string& name = "") {
  ToolCallPolicy policy;
  policy.tool_choice = mode;
  policy.tool_choice_name = name;
  return policy;
}

TEST(ToolCallStreamTest, AutoAllowsTextOrCalls) {
  EXPECT_EQ(RunText(kHermes, "just text", {}, Policy(v1::TOOL_CHOICE_AUTO)).events,
            (V{"text:just text"}));
  auto out = RunText(kHermes, kTwoCalls, {}, Policy(v1::TOOL_CHOICE_AUTO));
  EXPECT_EQ(out.error, "");
  EXPECT_EQ(out.events.size(), 3u);
}

TEST(ToolCallStreamTest, ToolChoiceNoneRejectsAnyCall) {
  auto out = RunText(kHermes, "ok " + Call("read", R"({"filePath": "a"})"), {},
                     Policy(v1::TOOL_CHOICE_NONE));
  EXPECT_EQ(out.events, (V{"text:ok "}));
  EXPECT_EQ(out.error,
            "invalid_tool_call: tool call 0 (\"read\"): tool_choice is \"none\" but the "
            "model called a tool");
}

TEST(ToolCallStreamTest, RequiredNeedsACall) {
  auto out = RunText(kHermes, "I won't.", {}, Policy(v1::TOOL_CHOICE_REQUIRED));
  EXPECT_EQ(out.events, (V{"text:I won't."}));
  EXPECT_EQ(out.error,
            "invalid_tool_call: tool_choice is \"required\" but the model made no tool call");
  EXPECT_EQ(RunText(kHermes, kTwoCalls, {}, Policy(v1::TOOL_CHOICE_REQUIRED)).error, "");
}

TEST(ToolCallStreamTest, NamedAllowsOnlyThatFunction) {
  EXPECT_EQ(RunText(kHermes, Call("read", R"({"filePath": "a"})"), {},
                    Policy(v1::TOOL_CHOICE_NAMED, "read"))
                .error,
            "");
  EXPECT_EQ(RunText(kHermes, kTwoCalls, {}, Policy(v1::TOOL_CHOICE_NAMED, "read")).error,
            "invalid_tool_call: tool call 1 (\"glob\"): tool_choice requires \"read\"");
  EXPECT_EQ(RunText(kHermes, "no", {}, Policy(v1::TOOL_CHOICE_NAMED, "read")).error,
            "invalid_tool_call: tool_choice requires a call to \"read\" but the model made no tool "
            "call");
}

TEST(ToolCallStreamTest, ParallelFalseAllowsOneCall) {
  ToolCallPolicy policy;
  policy.parallel_tool_calls = false;
  auto out = RunText(kHermes, kTwoCalls, {}, policy);
  // The first call was complete and valid when it went out; the second ends the request.
  EXPECT_EQ(out.events, (V{R"(call 0 read {"filePath":"a"})", "text:\n"}));
  EXPECT_EQ(out.error,
            "too_many_tool_calls: the model made more than 1 tool call "
            "(parallel_tool_calls is false); tool call 1 (\"glob\") is one too many");
  ExpectSplitInvariant(kHermes, kTwoCalls, {}, policy);
  EXPECT_EQ(RunText(kHermes, Call("read", R"({"filePath": "a"})"), {}, policy).error, "");
}

TEST(ToolCallStreamTest, MaxToolCalls) {
  ToolCallPolicy policy;
  policy.max_tool_calls = 2;
  const std::string three = kTwoCalls + Call("grep", R"({"pattern": "x"})");
  auto out = RunText(kHermes, three, {}, policy);
  EXPECT_EQ(out.error,
            "too_many_tool_calls: the model made more than 2 tool calls "
            "(max_tool_calls is 2); tool call 2 (\"grep\") is one too many");
  EXPECT_EQ(RunText(kHermes, kTwoCalls, {}, policy).error, "");
  policy.parallel_tool_calls = false;  // the smaller limit wins
  EXPECT_EQ(RunText(kHermes, kTwoCalls, {}, policy).error.substr(0, 19), "too_many_tool_calls");
}

TEST(ToolCallStreamTest, IdsAreServerIssuedAndUnique) {
  ToolCallStream stream(kHermes, {}, toolcall_testing::TestTools(), {});
  std::vector<v1::StreamEvent> events;
  ASSERT_TRUE(stream.Feed(kTwoCalls, &events).ok());
  ASSERT_TRUE(stream.Finish(&events).ok());
  std::set<std::string> ids;
  uint32_t index = 0;
  for (const auto& event : events) {
    if (!event.has_tool_call()) continue;
    EXPECT_EQ(event.tool_call().index(), index++);
    EXPECT_TRUE(IsValidId(event.tool_call().call().id(), "call"));
    ids.insert(event.tool_call().call().id());
  }
  EXPECT_EQ(ids.size(), 2u);
  EXPECT_EQ(stream.calls(), 2u);
}

TEST(ToolCallStreamTest, FailureIsTerminal) {
  ToolCallStream stream(kHermes, {}, toolcall_testing::TestTools(), {});
  std::vector<v1::StreamEvent> events;
  absl::Status status = stream.Feed(Call("nope", "{}"), &events);
  EXPECT_EQ(ReasonOf(status), "invalid_tool_call");
  EXPECT_EQ(stream.Feed("more text", &events), status);
  EXPECT_EQ(stream.Finish(&events), status);
  EXPECT_TRUE(events.empty());
}

v1::InferenceRequest Request(const std::string& client) {
  v1::InferenceRequest request;
  *request.mutable_tools() = ClientTools(client);
  return request;
}

TEST(ToolCallStreamCreateTest, RealClientRequests) {
  for (const char* client : {"opencode/chat", "qwen-code/chat-default", "qwen-code/chat-yolo"}) {
    for (ToolProtocol protocol : {ToolProtocol::kHermesJson, ToolProtocol::kQwen3CoderXml,
                                  ToolProtocol::kLlama31Json, ToolProtocol::kMistralToolCalls}) {
      auto stream = ToolCallStream::Create(protocol, Request(client), {});
      EXPECT_TRUE(stream.ok()) << client << ": " << stream.status();
    }
  }
}

TEST(ToolCallStreamCreateTest, Refusals) {
  auto undeclared = ToolCallStream::Create(ToolProtocol::kNone, Request("opencode/chat"), {});
  EXPECT_EQ(ReasonOf(undeclared.status()), "tool_protocol_undeclared");

  // No tools and no protocol: a plain request still streams.
  auto plain = ToolCallStream::Create(ToolProtocol::kNone, v1::InferenceRequest(), {});
  ASSERT_TRUE(plain.ok());
  std::vector<v1::StreamEvent> events;
  ASSERT_TRUE((*plain)->Feed("<tool_call>{}</tool_call>", &events).ok());
  ASSERT_TRUE((*plain)->Finish(&events).ok());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].text().text(), "<tool_call>{}</tool_call>");

  v1::InferenceRequest required;
  required.set_tool_choice(v1::TOOL_CHOICE_REQUIRED);
  EXPECT_EQ(ReasonOf(ToolCallStream::Create(kHermes, required, {}).status()), "invalid_request");

  v1::InferenceRequest named = Request("opencode/chat");
  named.set_tool_choice(v1::TOOL_CHOICE_NAMED);
  named.set_tool_choice_name("nope");
  EXPECT_EQ(ReasonOf(ToolCallStream::Create(kHermes, named, {}).status()), "invalid_request");

  v1::InferenceRequest bad = Request("opencode/chat");
  bad.mutable_tools(0)->set_parameters_json(R"({"type": "strng"})");
  auto compiled = ToolCallStream::Create(kHermes, bad, {});
  EXPECT_EQ(ReasonOf(compiled.status()), "invalid_request");
  EXPECT_NE(compiled.status().message().find("tool \"bash\" parameters: schema /type"),
            std::string::npos)
      << compiled.status();

  v1::InferenceRequest twice = Request("opencode/chat");
  *twice.add_tools() = twice.tools(0);
  EXPECT_EQ(ReasonOf(ToolCallStream::Create(kHermes, twice, {}).status()), "invalid_request");
}

// A call written when the request offers no tools (all of them stripped by the router's
// policy, say) is not passed on as text, which some clients parse and run: it fails
// validation like any call to a tool that is not advertised.
TEST(ToolCallStreamCreateTest, ACallWithoutOfferedToolsIsInvalidNotText) {
  auto stream = ToolCallStream::Create(kHermes, v1::InferenceRequest(), {});
  ASSERT_TRUE(stream.ok()) << stream.status();
  std::vector<v1::StreamEvent> events;
  absl::Status fed = (*stream)->Feed(
      "Sure. <tool_call>{\"name\": \"write_file\", \"arguments\": {\"path\": \"/etc/x\"}}</tool_call>",
      &events);
  if (fed.ok()) fed = (*stream)->Finish(&events);
  EXPECT_EQ(ReasonOf(fed), "invalid_tool_call") << fed;
  for (const v1::StreamEvent& e : events) {
    EXPECT_FALSE(e.has_tool_call());
    if (e.has_text()) EXPECT_EQ(e.text().text().find("write_file"), std::string::npos) << e.text().text();
  }
}

TEST(ToolCallStreamCreateTest, PolicyFromRequest) {
  v1::InferenceRequest request;
  EXPECT_TRUE(ToolCallPolicy::FromRequest(request).parallel_tool_calls);  // absent = true
  request.set_parallel_tool_calls(false);
  request.set_max_tool_calls(3);
  ToolCallPolicy policy = ToolCallPolicy::FromRequest(request);
  EXPECT_FALSE(policy.parallel_tool_calls);
  EXPECT_EQ(policy.CallLimit(), 1u);
  request.set_parallel_tool_calls(true);
  EXPECT_EQ(ToolCallPolicy::FromRequest(request).CallLimit(), 3u);
}

}  // namespace
}  // namespace gantry::toolcall
