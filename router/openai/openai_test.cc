#include <dirent.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/error_codes.h"
#include "common/json.h"
#include "common/status.h"
#include "gtest/gtest.h"
#include "router/http/test_http_client.h"
#include "router/openai/chat_request.h"
#include "router/openai/chat_response.h"

namespace gantry::openai {
namespace {

using json::Value;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> CaptureFiles() {
  std::vector<std::string> out;
  for (const char* dir : {"tests/data/clients/opencode", "tests/data/clients/qwen-code"}) {
    if (DIR* d = opendir(dir)) {
      while (dirent* e = readdir(d)) {
        if (absl::EndsWith(e->d_name, ".json")) out.push_back(absl::StrCat(dir, "/", e->d_name));
      }
      closedir(d);
    }
  }
  return out;
}

Value CaptureBody(const std::string& path) {
  auto root = json::Parse(ReadFile(path));
  EXPECT_TRUE(root.ok()) << path;
  const Value* body = root->Find("body");
  EXPECT_NE(body, nullptr);
  return *body;
}

TEST(ChatRequest, EveryCaptureParses) {
  std::vector<std::string> files = CaptureFiles();
  ASSERT_EQ(files.size(), 7u);
  for (const auto& path : files) {
    Value body = CaptureBody(path);
    auto parsed = ParseChatCompletionRequest(json::DumpCompact(body));
    ASSERT_TRUE(parsed.ok()) << path << ": " << parsed.status();
    const v1::InferenceRequest& req = parsed->request;
    EXPECT_EQ(req.model(), "capture-model");
    EXPECT_TRUE(parsed->stream) << path;
    EXPECT_TRUE(parsed->include_usage) << path;
    EXPECT_EQ(req.max_tokens(), 32000u) << path;
    EXPECT_EQ(req.messages_size(), static_cast<int>(body.Find("messages")->items().size()));
    const Value* tools = body.Find("tools");
    ASSERT_EQ(req.tools_size(), tools ? static_cast<int>(tools->items().size()) : 0) << path;
    // Every advertised schema is kept exactly (type arrays, oneOf/anyOf, $schema,
    // +-2^53 bounds): it parses back to the value the client sent.
    for (int i = 0; i < req.tools_size(); ++i) {
      const Value& function = *tools->items()[i].Find("function");
      const Value* parameters = function.Find("parameters");
      if (parameters == nullptr) {
        EXPECT_EQ(req.tools(i).parameters_json(), "") << path;
        continue;
      }
      auto again = json::Parse(req.tools(i).parameters_json());
      ASSERT_TRUE(again.ok());
      EXPECT_EQ(*again, *parameters) << path << " tool " << req.tools(i).name();
    }
  }
}

TEST(ChatRequest, QwenCodeShapes) {
  auto parsed = ParseChatCompletionRequest(
      json::DumpCompact(CaptureBody("tests/data/clients/qwen-code/chat-default_02_turn2.json")));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const auto& req = parsed->request;
  ASSERT_EQ(req.messages_size(), 4);
  EXPECT_TRUE(absl::StrContains(req.messages(1).content(),
                                "Read index.html and tell me what its heading says."));
  EXPECT_TRUE(absl::StrContains(req.messages(1).content(), "</system-reminder>\n"));
  EXPECT_EQ(req.messages(2).role(), "assistant");
  EXPECT_TRUE(req.messages(2).content_null());
  ASSERT_EQ(req.messages(2).tool_calls_size(), 1);
  EXPECT_EQ(req.messages(2).tool_calls(0).name(), "read_file");
  EXPECT_EQ(req.messages(3).role(), "tool");
  EXPECT_EQ(req.messages(3).tool_call_id(), req.messages(2).tool_calls(0).id());
  EXPECT_TRUE(absl::StrContains(req.messages(3).content(), "<h1>"));
  int without_parameters = 0;
  for (const auto& tool : req.tools()) without_parameters += tool.parameters_json().empty();
  EXPECT_GE(without_parameters, 1);
}

TEST(ChatRequest, OpenCodeShapes) {
  auto parsed = ParseChatCompletionRequest(
      json::DumpCompact(CaptureBody("tests/data/clients/opencode/chat_03_turn2.json")));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const auto& req = parsed->request;
  EXPECT_EQ(req.tool_choice(), v1::TOOL_CHOICE_AUTO);
  EXPECT_FALSE(req.messages(2).content_null());
  EXPECT_EQ(req.messages(2).content(), "");
  bool saw_schema = false, saw_bound = false;
  for (const auto& tool : req.tools()) {
    saw_schema |= absl::StrContains(tool.parameters_json(), "json-schema.org/draft/2020-12");
    saw_bound |= absl::StrContains(tool.parameters_json(), "9007199254740991");
  }
  EXPECT_TRUE(saw_schema);
  EXPECT_TRUE(saw_bound);
}

TEST(ChatRequest, Fields) {
  auto parsed = ParseChatCompletionRequest(R"({
    "model": "m",
    "messages": [{"role": "developer", "content": "sys"},
                 {"role": "user", "content": [{"type": "text", "text": "a"},
                                              {"type": "text", "text": "b"}]}],
    "tools": [{"type": "function", "function": {"name": "f",
               "parameters": {"type": "object", "properties": {"n": {"type": ["integer", "null"],
               "minimum": -9007199254740991, "maximum": 9007199254740991}}}}}],
    "tool_choice": {"type": "function", "function": {"name": "f"}},
    "parallel_tool_calls": false, "max_tokens": 10, "max_completion_tokens": 20,
    "stop": "END", "temperature": 0.5, "top_p": 0.9, "seed": -1,
    "reasoning_effort": "low", "stream": false, "user": "ignored",
    "chat_template_kwargs": {"enable_thinking": false}})");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const auto& req = parsed->request;
  EXPECT_EQ(req.messages(0).role(), "system");
  EXPECT_EQ(req.messages(1).content(), "a\nb");
  EXPECT_EQ(req.tool_choice(), v1::TOOL_CHOICE_NAMED);
  EXPECT_EQ(req.tool_choice_name(), "f");
  ASSERT_TRUE(req.has_parallel_tool_calls());
  EXPECT_FALSE(req.parallel_tool_calls());
  EXPECT_EQ(req.max_tokens(), 20u);  // max_completion_tokens wins
  ASSERT_EQ(req.stop_size(), 1);
  EXPECT_FLOAT_EQ(req.sampling().temperature(), 0.5f);
  EXPECT_EQ(req.sampling().seed(), UINT64_MAX);
  EXPECT_EQ(req.reasoning_effort(), "low");
  EXPECT_EQ(req.template_kwargs_json().at("enable_thinking"), "false");
  EXPECT_TRUE(absl::StrContains(req.tools(0).parameters_json(), "-9007199254740991"));
  EXPECT_FALSE(parsed->stream);
}

void ExpectInvalid(const std::string& body, const std::string& reason,
                   const std::string& message_part) {
  auto parsed = ParseChatCompletionRequest(body);
  ASSERT_FALSE(parsed.ok()) << body;
  EXPECT_EQ(ReasonOf(parsed.status()), reason) << parsed.status();
  EXPECT_EQ(HttpStatusFor(parsed.status()), 400);
  EXPECT_TRUE(absl::StrContains(parsed.status().message(), message_part)) << parsed.status();
}

TEST(ChatRequest, Errors) {
  ExpectInvalid("{", "invalid_json", "");
  ExpectInvalid("[]", "invalid_json", "object");
  ExpectInvalid(R"({"messages": []})", "invalid_request", "model");
  ExpectInvalid(R"({"model": 3, "messages": []})", "invalid_request", "model: expected a string");
  ExpectInvalid(R"({"model": "m", "messages": []})", "invalid_request", "messages: must not be empty");
  ExpectInvalid(R"({"model": "m", "messages": [{"role": "user", "content": 5}]})",
                "invalid_request", "messages[0].content");
  ExpectInvalid(R"({"model": "m", "messages": [{"role": "wizard", "content": "x"}]})",
                "invalid_request", "messages[0].role");
  ExpectInvalid(R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
                "invalid_request", "messages[0].content[0].type");
  ExpectInvalid(R"({"model": "m", "messages": [{"role": "tool", "content": "x"}]})",
                "invalid_request", "messages[0].tool_call_id");
  ExpectInvalid(R"({"model": "m", "messages": [{"role": "assistant", "content": null,
                  "tool_calls": [{"id": "c", "type": "function",
                  "function": {"name": "f", "arguments": "not json"}}]}]})",
                "invalid_request", "messages[0].tool_calls[0].function.arguments");
  ExpectInvalid(R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
                  "tools": [{"type": "function", "function": {"name": "f", "parameters": 1}}]})",
                "invalid_request", "tools[0].function.parameters");
  ExpectInvalid(R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
                  "tool_choice": "required"})", "invalid_request", "tool_choice");
  ExpectInvalid(R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": "9"})",
                "invalid_request", "max_tokens: expected an integer");
  ExpectInvalid(R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 3})",
                "invalid_request", "temperature");
  ExpectInvalid(R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "stop": [1]})",
                "invalid_request", "stop[0]");
  ExpectInvalid(R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": "yes"})",
                "invalid_request", "stream");
  ExpectInvalid(R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "n": 2})",
                "invalid_request", "n");
}

// --- responses -----------------------------------------------------------------------

std::vector<v1::StreamEvent> SampleEvents(bool with_calls) {
  std::vector<v1::StreamEvent> events;
  uint64_t seq = 0;
  auto add = [&](auto fill) {
    v1::StreamEvent e;
    e.set_request_id("req_000000000000000000000001");
    e.set_seq(seq++);
    fill(&e);
    events.push_back(e);
  };
  add([](v1::StreamEvent* e) { e->mutable_reasoning()->set_text("thinking"); });
  add([](v1::StreamEvent* e) { e->mutable_text()->set_text("Hello"); });
  add([](v1::StreamEvent* e) { e->mutable_text()->set_text(", world \"quoted\""); });
  if (with_calls) {
    for (uint32_t i = 0; i < 2; ++i) {
      add([i](v1::StreamEvent* e) {
        e->mutable_tool_call()->set_index(i);
        e->mutable_tool_call()->mutable_call()->set_id(absl::StrCat("call_00000000000000000000000", i));
        e->mutable_tool_call()->mutable_call()->set_name(i == 0 ? "read" : "glob");
        e->mutable_tool_call()->mutable_call()->set_arguments_json(R"({"path":"a b"})");
      });
    }
  }
  add([with_calls](v1::StreamEvent* e) {
    auto* t = e->mutable_terminal();
    t->set_finish_reason(with_calls ? v1::FINISH_TOOL_CALLS : v1::FINISH_STOP);
    t->mutable_status()->set_code("OK");
    t->mutable_usage()->set_prompt_tokens(11);
    t->mutable_usage()->set_completion_tokens(7);
    t->mutable_usage()->set_cached_prompt_tokens(3);
    t->mutable_usage()->set_prompt_ids_sha256(std::string(64, 'c'));
  });
  return events;
}

// Merges streamed chunks back into one message, as an OpenAI client does.
Value MergeChunks(const std::vector<std::string>& data, std::string* finish, Value* usage) {
  std::string content, reasoning;
  Value calls = Value::EmptyArray();
  for (const auto& line : data) {
    if (line == "[DONE]") continue;
    auto chunk = json::Parse(line);
    EXPECT_TRUE(chunk.ok()) << line;
    EXPECT_EQ(chunk->Find("object")->as_string(), "chat.completion.chunk");
    if (const Value* u = chunk->Find("usage")) *usage = *u;
    for (const Value& choice : chunk->Find("choices")->items()) {
      const Value& delta = *choice.Find("delta");
      if (const Value* c = delta.Find("content")) content += c->as_string();
      if (const Value* r = delta.Find("reasoning_content")) reasoning += r->as_string();
      if (const Value* tc = delta.Find("tool_calls")) {
        for (const Value& call : tc->items()) {
          // The first (and only) delta of each call carries everything OpenCode needs.
          EXPECT_NE(call.Find("index"), nullptr);
          EXPECT_TRUE(call.Find("id") && call.Find("id")->is_string());
          EXPECT_EQ(call.Find("type")->as_string(), "function");
          EXPECT_TRUE(call.Find("function")->Find("name")->is_string());
          Value copy = call;
          copy.members().erase(copy.members().begin());  // drop "index"
          calls.Append(copy);
        }
      }
      const Value* f = choice.Find("finish_reason");
      if (f && f->is_string()) *finish = f->as_string();
    }
  }
  Value message = Value::EmptyObject();
  message.Set("role", Value::String("assistant"));
  message.Set("content", content.empty() && !calls.items().empty() ? Value() : Value::String(content));
  if (!reasoning.empty()) message.Set("reasoning_content", Value::String(reasoning));
  if (!calls.items().empty()) message.Set("tool_calls", calls);
  return message;
}

TEST(ChatResponse, StreamedAndNonStreamedAgree) {
  for (bool with_calls : {false, true}) {
    ResponseMeta meta{"chatcmpl-1", "m", 1700000000};
    ChatStreamRenderer renderer(meta, /*include_usage=*/true);
    ChatCompletionAccumulator accumulator(meta);
    std::string sse;
    for (const auto& e : SampleEvents(with_calls)) {
      sse += renderer.OnEvent(e);
      accumulator.Add(e);
    }
    ASSERT_TRUE(renderer.finished());
    ASSERT_TRUE(accumulator.finished());
    ASSERT_TRUE(accumulator.error().ok());
    std::vector<std::string> data = http::SseDataLines(sse);
    ASSERT_GE(data.size(), 3u);
    EXPECT_EQ(data.back(), "[DONE]");
    auto first = json::Parse(data[0]);
    EXPECT_EQ(first->Find("choices")->items()[0].Find("delta")->Find("role")->as_string(),
              "assistant");
    std::string finish;
    Value usage;
    Value merged = MergeChunks(data, &finish, &usage);
    Value whole = accumulator.ToJson();
    const Value& choice = whole.Find("choices")->items()[0];
    EXPECT_EQ(merged, *choice.Find("message")) << json::DumpCompact(merged) << "\n"
                                               << json::DumpCompact(whole);
    EXPECT_EQ(finish, choice.Find("finish_reason")->as_string());
    EXPECT_EQ(usage, *whole.Find("usage"));
    EXPECT_EQ(usage.Find("total_tokens")->as_int64(), 18);
    EXPECT_EQ(usage.Find("gantry_prompt_ids_sha256")->as_string(), std::string(64, 'c'));
    EXPECT_EQ(finish, with_calls ? "tool_calls" : "stop");
  }
}

TEST(ChatResponse, NoUsageChunkWithoutIncludeUsage) {
  ChatStreamRenderer renderer({"chatcmpl-1", "m", 1}, false);
  std::string sse;
  for (const auto& e : SampleEvents(false)) sse += renderer.OnEvent(e);
  EXPECT_FALSE(absl::StrContains(sse, "\"usage\""));
}

TEST(ChatResponse, ErrorTerminalIsAnErrorEventWithoutDone) {
  ChatStreamRenderer renderer({"chatcmpl-1", "m", 1}, true);
  v1::StreamEvent text;
  text.mutable_text()->set_text("partial");
  std::string sse = renderer.OnEvent(text);
  v1::StreamEvent end;
  end.mutable_terminal()->set_finish_reason(v1::FINISH_ERROR);
  end.mutable_terminal()->mutable_status()->set_code("UNAVAILABLE");
  end.mutable_terminal()->mutable_status()->set_reason("worker_lost");
  sse += renderer.OnEvent(end);
  sse += renderer.OnEvent(text);  // ignored after the terminal
  std::vector<std::string> data = http::SseDataLines(sse);
  ASSERT_EQ(data.size(), 3u);
  EXPECT_TRUE(absl::StrContains(data[2], "\"code\":\"worker_lost\""));
  EXPECT_FALSE(absl::StrContains(sse, "[DONE]"));

  ChatCompletionAccumulator accumulator({"chatcmpl-1", "m", 1});
  accumulator.Add(text);
  accumulator.Add(end);
  EXPECT_EQ(ReasonOf(accumulator.error()), "worker_lost");
}

TEST(ChatResponse, Models) {
  Value list = ModelListJson({"a", "b"}, 5);
  EXPECT_EQ(json::DumpCompact(list),
            R"({"object":"list","data":[{"id":"a","object":"model","created":5,"owned_by":"gantry"},)"
            R"({"id":"b","object":"model","created":5,"owned_by":"gantry"}]})");
}

}  // namespace
}  // namespace gantry::openai
