#include <dirent.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/error_codes.h"
#include "common/json.h"
#include "common/status.h"
#include "gtest/gtest.h"
#include "router/http/test_http_client.h"
#include "router/openai/chat_request.h"
#include "router/openai/chat_response.h"
#include "router/openai/request_fields.h"
#include "router/openai/responses_request.h"
#include "router/openai/responses_response.h"

namespace gantry::openai {
namespace {

using json::Value;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> CaptureFiles(
    std::initializer_list<const char*> dirs = {"tests/data/clients/opencode",
                                               "tests/data/clients/qwen-code"}) {
  std::vector<std::string> out;
  for (const char* dir : dirs) {
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

// The tools of a body are what parsing them gives, whether parsed now or found among
// the tool lists parsed before (the same text in an earlier body): every capture and
// variations of one, three times each, against ParseFunctionTools on a fresh parse.
TEST(ChatRequest, KnownToolListsGiveTheParsedTools) {
  auto reference = [](const std::string& text) {
    v1::InferenceRequest ref;
    auto root = json::Parse(text);
    EXPECT_TRUE(root.ok());
    if (const Value* tools = Field(*root, "tools")) {
      EXPECT_TRUE(ParseFunctionTools(*tools, /*nested=*/true, &ref).ok());
    }
    return ref;
  };
  std::vector<std::string> bodies;
  for (const auto& path : CaptureFiles()) bodies.push_back(json::DumpCompact(CaptureBody(path)));
  const std::string tools =
      R"([{"type":"function","function":{"name":"read_file","description":"Reads.","parameters":)"
      R"({"type":"object","properties":{"path":{"type":"string","maxLength":1e3}}}}},)"
      R"({"type":"function","function":{"name":"glob","parameters":{"type":"object"}}}])";
  auto with = [](const std::string& tools_text) {
    return absl::StrCat(R"({"model":"m","messages":[{"role":"user","content":"hi"}],"tools":)",
                        tools_text, "}");
  };
  bodies.push_back(with(tools));
  bodies.push_back(with(absl::StrReplaceAll(tools, {{"Reads.", "Reads!"}})));  // one byte off
  bodies.push_back(with(absl::StrReplaceAll(tools, {{"1e3", "1000.0"}})));    // same value, other text
  bodies.push_back(with(" " + tools + " "));                                  // blanks around
  for (int round = 0; round < 3; ++round) {
    for (const std::string& body : bodies) {
      auto parsed = ParseChatCompletionRequest(body);
      ASSERT_TRUE(parsed.ok()) << parsed.status() << ": " << body.substr(0, 200);
      v1::InferenceRequest ref = reference(body);
      ASSERT_EQ(parsed->request.tools_size(), ref.tools_size());
      for (int i = 0; i < ref.tools_size(); ++i) {
        EXPECT_EQ(parsed->request.tools(i).SerializeAsString(), ref.tools(i).SerializeAsString())
            << "round " << round << " tool " << i;
      }
    }
  }
  // "tools" twice: the last one counts, whichever of them was seen before.
  const std::string other =
      R"([{"type":"function","function":{"name":"edit","parameters":{"type":"object"}}}])";
  for (const std::string& body :
       {absl::StrCat(R"({"model":"m","messages":[{"role":"user","content":"hi"}],"tools":)", tools,
                     R"(,"tools":)", other, "}"),
        absl::StrCat(R"({"model":"m","messages":[{"role":"user","content":"hi"}],"tools":)", other,
                     R"(,"tools":)", tools, "}")}) {
    for (int round = 0; round < 2; ++round) {
      auto parsed = ParseChatCompletionRequest(body);
      ASSERT_TRUE(parsed.ok()) << parsed.status();
      v1::InferenceRequest ref = reference(body);
      ASSERT_EQ(parsed->request.tools_size(), ref.tools_size());
      EXPECT_EQ(parsed->request.tools(0).name(), ref.tools(0).name());
    }
  }
  // Tools that fail are refused every time (never kept); so is a body that holds known
  // tools but is broken after them, as it is without them.
  const std::string twice =
      R"([{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"a"}}])";
  for (int round = 0; round < 2; ++round) {
    auto refused = ParseChatCompletionRequest(with(twice));
    ASSERT_FALSE(refused.ok());
    EXPECT_TRUE(absl::StrContains(refused.status().message(), "duplicate tool 'a'")) << refused.status();
    const std::string broken = with(tools) + "x";
    auto bad = ParseChatCompletionRequest(broken);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.status(), json::Parse(broken).status());
    auto bad_messages = ParseChatCompletionRequest(
        absl::StrCat(R"({"model":"m","messages":[{"role":"robot","content":"hi"}],"tools":)", tools, "}"));
    ASSERT_FALSE(bad_messages.ok());
    EXPECT_TRUE(absl::StrContains(bad_messages.status().message(), "messages[0].role")) << bad_messages.status();
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
    "reasoning_effort": "low", "stream": false, "store": false, "n": 1, "logprobs": false,
    "top_logprobs": 0, "response_format": {"type": "text"}, "modalities": ["text"],
    "service_tier": "auto", "presence_penalty": 0.5, "frequency_penalty": -0.25,
    "logit_bias": {"42": -100, "7": 3.5}, "prompt_cache_key": "ses_1", "user": null,
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
  EXPECT_FLOAT_EQ(req.sampling().presence_penalty(), 0.5f);
  EXPECT_FLOAT_EQ(req.sampling().frequency_penalty(), -0.25f);
  ASSERT_EQ(req.sampling().logit_bias_size(), 2);
  EXPECT_FLOAT_EQ(req.sampling().logit_bias().at(42), -100.0f);
  EXPECT_FLOAT_EQ(req.sampling().logit_bias().at(7), 3.5f);
  EXPECT_EQ(req.prompt_cache_key(), "ses_1");
}

// Every field of OpenAI's chat completions request (its API reference, late 2026) is
// in the table, implemented or refused; a refused one, or one the table does not list,
// is a 400 unsupported_parameter naming it, never accepted and ignored.
const char* const kOpenAiChatFields[] = {
    "messages", "model", "audio", "frequency_penalty", "function_call", "functions", "logit_bias",
    "logprobs", "max_completion_tokens", "max_tokens", "metadata", "modalities", "n",
    "parallel_tool_calls", "prediction", "presence_penalty", "prompt_cache_key", "prompt_cache_retention",
    "reasoning_effort", "response_format", "safety_identifier", "seed", "service_tier", "stop", "store",
    "stream", "stream_options", "temperature", "tool_choice", "tools", "top_logprobs", "top_p", "user",
    "verbosity", "web_search_options"};

TEST(ChatRequest, EveryOpenAiFieldIsImplementedOrRefused) {
  std::set<std::string> listed;
  for (const FieldRule& rule : ChatCompletionFields()) {
    EXPECT_TRUE(listed.insert(rule.name).second) << "twice: " << rule.name;
  }
  for (const char* field : kOpenAiChatFields) {
    SCOPED_TRACE(field);
    ASSERT_TRUE(listed.count(field)) << "not in ChatCompletionFields()";
    const FieldRule& rule = *std::find_if(ChatCompletionFields().begin(), ChatCompletionFields().end(),
                                          [&](const FieldRule& r) { return std::string(r.name) == field; });
    if (rule.refused == nullptr) continue;
    // A refused field with any value is a 400 naming it; null asks for nothing.
    const std::string base = R"({"model": "m", "messages": [{"role": "user", "content": "x"}], ")";
    auto refused = ParseChatCompletionRequest(base + field + R"(": {"a": 1}})");
    EXPECT_EQ(ReasonOf(refused.status()), "unsupported_parameter") << refused.status();
    EXPECT_EQ(ParamOf(refused.status()), field);
    EXPECT_EQ(HttpStatusFor(refused.status()), 400);
    EXPECT_TRUE(ParseChatCompletionRequest(base + field + R"(": null})").ok());
  }
  // Values of implemented fields that Gantry does not implement.
  const std::string base = R"({"model": "m", "messages": [{"role": "user", "content": "x"}], )";
  for (const auto& [field, json] : std::vector<std::pair<std::string, std::string>>{
           {"n", R"("n": 2)"},
           {"store", R"("store": true)"},
           {"response_format.type", R"("response_format": {"type": "grammar"})"},
           {"response_format.json_schema.schema",
            R"("response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema":
                {"type": "string", "pattern": "^a"}}})"},
           {"response_format.json_schema.description",
            R"("response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {},
                "description": "an a"}})"},
           {"response_format.json_schema.examples",
            R"("response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {}, "examples": []}})"},
           {"logprobs", R"("logprobs": true)"},
           {"top_logprobs", R"("top_logprobs": 2)"},
           {"modalities[1]", R"("modalities": ["text", "audio"])"},
           {"service_tier", R"("service_tier": "flex")"},
           {"stream_options.include_obfuscation", R"("stream_options": {"include_obfuscation": true})"},
           {"misspelt_field", R"("misspelt_field": 1)"},
           // Inside the body's objects: nothing unread either.
           {"messages[0].audio", R"("messages": [{"role": "user", "content": "x", "audio": {"id": "a"}}])"},
           {"messages[0].content[0].cache_control",
            R"("messages": [{"role": "user", "content": [{"type": "text", "text": "x", "cache_control": {}}]}])"},
           {"messages[0].content[0].annotations",
            R"("messages": [{"role": "user", "content": [{"type": "text", "text": "x", "annotations": [1]}]}])"},
           {"tools[0].function.examples",
            R"("tools": [{"type": "function", "function": {"name": "f", "examples": []}}])"},
           {"tools[0].cache_control", R"("tools": [{"type": "function", "function": {"name": "f"}, "cache_control": {}}])"},
           {"tool_choice.type", R"("tools": [{"type": "function", "function": {"name": "f"}}],
                                   "tool_choice": {"type": "allowed_tools", "function": {"name": "f"}})"}}) {
    SCOPED_TRACE(json);
    // Bodies that bring their own messages replace the base's.
    const std::string body = absl::StrContains(json, R"("messages")")
                                 ? std::string(R"({"model": "m", )") + json + "}"
                                 : base + json + "}";
    auto refused = ParseChatCompletionRequest(body);
    EXPECT_EQ(ReasonOf(refused.status()), "unsupported_parameter") << refused.status();
    EXPECT_EQ(ParamOf(refused.status()), field);
  }
  // A replayed assistant turn with null extras (an SDK's message object) passes.
  EXPECT_TRUE(ParseChatCompletionRequest(R"({"model": "m", "messages": [{"role": "user", "content": "x"},
      {"role": "assistant", "content": "y", "refusal": null, "audio": null, "function_call": null}]})")
                  .ok());
}

template <typename Parse>
void ExpectInvalidWith(Parse parse, const std::string& body, const std::string& reason,
                       const std::string& message_part) {
  auto parsed = parse(body);
  ASSERT_FALSE(parsed.ok()) << body;
  EXPECT_EQ(ReasonOf(parsed.status()), reason) << parsed.status();
  EXPECT_EQ(HttpStatusFor(parsed.status()), 400);
  EXPECT_TRUE(absl::StrContains(parsed.status().message(), message_part)) << parsed.status();
}

void ExpectInvalid(const std::string& body, const std::string& reason,
                   const std::string& message_part) {
  ExpectInvalidWith(ParseChatCompletionRequest, body, reason, message_part);
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
                "unsupported_parameter", "n");
  ExpectInvalid(R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "logit_bias": {"x": 1}})",
                "invalid_request", "logit_bias['x']");
  ExpectInvalid(R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "logit_bias": {"5": 101}})",
                "invalid_request", "logit_bias['5']");
  ExpectInvalid(R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "presence_penalty": 3})",
                "invalid_request", "presence_penalty");
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

// ---- unknown call ids on replay (both APIs) -----------------------------------------

TEST(ChatRequest, ToolResultForAnUnknownCallIdIsRejected) {
  // A result whose id no earlier assistant call has (here: the result comes first).
  auto parsed = ParseChatCompletionRequest(R"({"model": "m", "messages": [
      {"role": "user", "content": "hi"},
      {"role": "tool", "tool_call_id": "call_x", "content": "r"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_x", "type": "function",
        "function": {"name": "f", "arguments": "{}"}}]}]})");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(ReasonOf(parsed.status()), "unknown_tool_call_id");
  EXPECT_EQ(HttpStatusFor(parsed.status()), 400);
  EXPECT_TRUE(absl::StrContains(parsed.status().message(), "messages[1].tool_call_id"));
  // In order it is fine.
  EXPECT_TRUE(ParseChatCompletionRequest(R"({"model": "m", "messages": [
      {"role": "user", "content": "hi"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_x", "type": "function",
        "function": {"name": "f", "arguments": "{}"}}]},
      {"role": "tool", "tool_call_id": "call_x", "content": "r"}]})").ok());
}

// ---- Responses API requests ------------------------------------------------------------

// The same conversation in both APIs maps onto the same internal request: one assistant
// turn holding reasoning, text and both calls, then each result under its own id.
TEST(ResponsesRequest, ItemsMapOntoTheChatCompletionsTurn) {
  auto responses = ParseResponsesRequest(R"({
    "model": "m", "instructions": "Be brief.", "stream": true, "store": false,
    "max_output_tokens": 77, "reasoning": {"effort": "minimal"},
    "prompt_cache_key": "k", "include": ["reasoning.encrypted_content"],
    "tools": [{"type": "function", "name": "read", "description": "Read a file",
               "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}},
              {"type": "function", "name": "glob"}],
    "tool_choice": {"type": "function", "name": "read"}, "parallel_tool_calls": true,
    "input": [
      {"role": "user", "content": "Read a"},
      {"type": "reasoning", "id": "rs_1", "summary": [],
       "content": [{"type": "reasoning_text", "text": "think"}]},
      {"type": "message", "role": "assistant", "content": [{"type": "input_text", "text": "Looking."}]},
      {"type": "function_call", "call_id": "call_a", "name": "read", "arguments": "{\"path\":\"a\"}"},
      {"type": "function_call", "call_id": "call_b", "name": "glob", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "call_a", "output": "A"},
      {"type": "function_call_output", "call_id": "call_b",
       "output": [{"type": "input_text", "text": "B"}]}]})");
  ASSERT_TRUE(responses.ok()) << responses.status();
  auto chat = ParseChatCompletionRequest(R"({
    "model": "m", "stream": true, "max_completion_tokens": 77, "reasoning_effort": "low",
    "prompt_cache_key": "k",
    "tools": [{"type": "function", "function": {"name": "read", "description": "Read a file",
               "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}},
              {"type": "function", "function": {"name": "glob"}}],
    "tool_choice": {"type": "function", "function": {"name": "read"}}, "parallel_tool_calls": true,
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Read a"},
      {"role": "assistant", "content": "Looking.", "reasoning_content": "think", "tool_calls": [
        {"id": "call_a", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a\"}"}},
        {"id": "call_b", "type": "function", "function": {"name": "glob", "arguments": "{}"}}]},
      {"role": "tool", "tool_call_id": "call_a", "content": "A"},
      {"role": "tool", "tool_call_id": "call_b", "content": "B"}]})");
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_EQ(responses->chat.request.DebugString(), chat->request.DebugString());
  EXPECT_TRUE(responses->chat.stream);
  EXPECT_TRUE(responses->chat.has_max_tokens);
  EXPECT_EQ(responses->echo.Find("max_output_tokens")->as_int64(), 77);
  EXPECT_EQ(responses->echo.Find("instructions")->as_string(), "Be brief.");
}

TEST(ResponsesRequest, StringInputAndQwenCodeShapes) {
  auto plain = ParseResponsesRequest(R"({"model": "m", "input": "hello"})");
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_EQ(plain->chat.request.messages_size(), 1);
  EXPECT_EQ(plain->chat.request.messages(0).role(), "user");
  EXPECT_EQ(plain->chat.request.messages(0).content(), "hello");
  EXPECT_FALSE(plain->chat.stream);
  EXPECT_FALSE(plain->chat.has_max_tokens);
  // Qwen Code: a developer message, user text parts, an assistant turn of a call alone.
  auto qwen = ParseResponsesRequest(R"({"model": "m", "input": [
      {"type": "message", "role": "developer", "content": "sys"},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a"},
                                                      {"type": "input_text", "text": "b"}]},
      {"type": "function_call", "call_id": "call_1", "name": "read_file", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "call_1", "output": "x"}]})");
  ASSERT_TRUE(qwen.ok()) << qwen.status();
  const v1::InferenceRequest& r = qwen->chat.request;
  ASSERT_EQ(r.messages_size(), 4);
  EXPECT_EQ(r.messages(0).role(), "system");
  EXPECT_EQ(r.messages(1).content(), "a\nb");
  EXPECT_EQ(r.messages(2).role(), "assistant");
  EXPECT_TRUE(r.messages(2).content_null());
  EXPECT_EQ(r.messages(2).tool_calls(0).id(), "call_1");
  EXPECT_EQ(r.messages(3).tool_call_id(), "call_1");
}

// What both clients sent in Responses mode (Qwen Code with auth type openai-responses,
// OpenCode with @ai-sdk/openai), captured through the router by this project.
TEST(ResponsesRequest, EveryCaptureParses) {
  std::vector<std::string> files = CaptureFiles({"tests/data/clients/responses"});
  ASSERT_EQ(files.size(), 7u);
  for (const auto& path : files) {
    Value body = CaptureBody(path);
    auto parsed = ParseResponsesRequest(json::DumpCompact(body));
    ASSERT_TRUE(parsed.ok()) << path << ": " << parsed.status();
    const v1::InferenceRequest& req = parsed->chat.request;
    EXPECT_EQ(req.model(), "gantry-demo");
    EXPECT_TRUE(parsed->chat.stream) << path;
    EXPECT_EQ(req.max_tokens(), 32000u) << path;
    const Value* tools = body.Find("tools");
    ASSERT_EQ(req.tools_size(), tools ? static_cast<int>(tools->items().size()) : 0) << path;
    for (int i = 0; i < req.tools_size(); ++i) {
      const Value* parameters = tools->items()[i].Find("parameters");
      ASSERT_NE(parameters, nullptr) << path;  // every tool has a schema in this mode
      auto again = json::Parse(req.tools(i).parameters_json());
      ASSERT_TRUE(again.ok());
      EXPECT_EQ(*again, *parameters) << path << " " << req.tools(i).name();
    }
    ASSERT_GT(req.messages_size(), 0);
    EXPECT_EQ(req.messages(0).role(), "system") << path;  // instructions or a system item
    if (!absl::StrContains(path, "turn2")) continue;
    // Turn 2 ends with the assistant call and its result under the same id.
    const v1::ChatMessage& call = req.messages(req.messages_size() - 2);
    const v1::ChatMessage& result = req.messages(req.messages_size() - 1);
    ASSERT_EQ(call.role(), "assistant") << path;
    ASSERT_EQ(call.tool_calls_size(), 1) << path;
    EXPECT_EQ(result.role(), "tool");
    EXPECT_EQ(result.tool_call_id(), call.tool_calls(0).id());
    EXPECT_TRUE(absl::StrContains(result.content(), "Gantry works")) << path;
    // Turn 1 began with reasoning: the client sent it back (through the carrier in
    // encrypted_content) and it is the reasoning of the same assistant turn.
    if (absl::StrContains(path, "reasoning")) {
      EXPECT_TRUE(absl::StartsWith(call.reasoning_content(), "\n")) << path;
      EXPECT_GT(call.reasoning_content().size(), 5u) << path;
    } else {
      EXPECT_EQ(call.reasoning_content(), "") << path;
    }
  }
}

// Qwen Code replays a reasoning item only when it has an encrypted_content (otherwise it
// turns the reasoning into visible assistant text): the item Gantry sends carries the
// text, and the same item sent back becomes the turn's reasoning_content again.
TEST(ResponsesRequest, ReasoningRoundTripsThroughItsCarrier) {
  ResponsesRenderer renderer("resp_4", "m", 1, Value::EmptyObject());
  v1::StreamEvent reasoning, stop;
  reasoning.mutable_reasoning()->set_text("\nI will read it.\n");
  stop.mutable_terminal()->set_finish_reason(v1::FINISH_STOP);
  renderer.OnEvent(reasoning);
  renderer.OnEvent(stop);
  Value item = renderer.ResponseJson().Find("output")->items()[0];
  const std::string carrier = item.Find("encrypted_content")->as_string();
  EXPECT_TRUE(absl::StartsWith(carrier, "gantry-reasoning.v1.")) << carrier;
  // What Qwen Code sends back: id, the carrier and a trimmed summary, no content.
  auto parsed = ParseResponsesRequest(absl::StrCat(
      R"({"model": "m", "input": [{"role": "user", "content": "q"}, {"type": "reasoning",
          "id": "rs_4_0", "encrypted_content": ")", carrier,
      R"(", "summary": [{"type": "summary_text", "text": "I will read it."}]},
         {"type": "message", "role": "assistant", "content": "\n\n"},
         {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"}]})"));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->chat.request.messages_size(), 2);
  const v1::ChatMessage& turn = parsed->chat.request.messages(1);
  EXPECT_EQ(turn.reasoning_content(), "\nI will read it.\n");
  EXPECT_EQ(turn.content(), "\n\n");
  EXPECT_EQ(turn.tool_calls_size(), 1);
  // Another server's opaque blob is skipped for the summary; a broken one of ours too.
  for (const char* blob : {"gAAAAABopaque", "gantry-reasoning.v1.@@@"}) {
    auto other = ParseResponsesRequest(absl::StrCat(
        R"({"model": "m", "input": [{"type": "reasoning", "encrypted_content": ")", blob,
        R"(", "summary": [{"type": "summary_text", "text": "short"}]}, {"role": "user", "content": "q"}]})"));
    ASSERT_TRUE(other.ok()) << other.status();
    EXPECT_EQ(other->chat.request.messages(0).reasoning_content(), "short");
  }
}

void ExpectResponsesInvalid(const std::string& body, const std::string& reason,
                            const std::string& message_part) {
  ExpectInvalidWith(ParseResponsesRequest, body, reason, message_part);
}

TEST(ResponsesRequest, Errors) {
  ExpectResponsesInvalid("{", "invalid_json", "");
  ExpectResponsesInvalid(R"({"model": "m"})", "invalid_request", "input: is required");
  ExpectResponsesInvalid(R"({"model": "m", "input": []})", "invalid_request", "input: must not be empty");
  ExpectResponsesInvalid(R"({"model": "m", "input": 4})", "invalid_request", "input: expected");
  ExpectResponsesInvalid(R"({"model": "m", "input": "x", "previous_response_id": "resp_1"})",
                         "unsupported_parameter", "previous_response_id");
  ExpectResponsesInvalid(R"({"model": "m", "input": [{"type": "item_reference", "id": "fc_1"}]})",
                         "invalid_request", "input[0]: item_reference");
  ExpectResponsesInvalid(R"({"model": "m", "input": [{"role": "user", "content":
                             [{"type": "input_image", "image_url": "data:"}]}]})",
                         "invalid_request", "input[0].content[0].type");
  ExpectResponsesInvalid(R"({"model": "m", "input": "x", "tools": [{"type": "web_search"}]})",
                         "invalid_request", "tools[0].type");
  ExpectResponsesInvalid(R"({"model": "m", "input": "x", "tools": [{"type": "function", "name": "f"}],
                             "tool_choice": {"type": "function", "name": "g"}})",
                         "invalid_request", "tool_choice.name");
  ExpectResponsesInvalid(R"({"model": "m", "input": [{"type": "function_call", "name": "f",
                             "arguments": "{}"}]})", "invalid_request", "input[0].call_id");
  ExpectResponsesInvalid(R"({"model": "m", "input": [{"type": "function_call", "call_id": "c",
                             "name": "f", "arguments": "[1]"}]})", "invalid_request",
                         "input[0].arguments");
  ExpectResponsesInvalid(R"({"model": "m", "input": "x", "text": {"format": {"type": "json_schema"}}})",
                         "invalid_request", "text.format.name: required");
  ExpectResponsesInvalid(R"({"model": "m", "input": "x", "text": {"format": {"type": "json_schema",
                             "name": "n", "schema": {"type": "array", "uniqueItems": true}}}})",
                         "unsupported_parameter", "does not enforce `uniqueItems`");
  for (const char* body : {R"({"model": "m", "input": "x", "store": true})",
                           R"({"model": "m", "input": "x", "include": ["message.output_text.logprobs"]})",
                           R"({"model": "m", "input": "x", "truncation": "auto"})",
                           R"({"model": "m", "input": "x", "top_logprobs": 3})",
                           R"({"model": "m", "input": "x", "background": true})",
                           R"({"model": "m", "input": "x", "user": "u1"})",
                           R"({"model": "m", "input": "x", "text": {"verbosity": "low"}})",
                           R"({"model": "m", "input": "x", "stream_options": {"include_obfuscation": false}})",
                           R"({"model": "m", "input": "x", "misspelt": 1})",
                           R"({"model": "m", "input": "x", "reasoning": {"effort": "low", "summary": "auto"}})",
                           R"({"model": "m", "input": [{"type": "message", "role": "user", "content": "x",
                               "phase": "final"}]})",
                           R"({"model": "m", "input": "x", "tools": [{"type": "function", "name": "f",
                               "cache_control": {}}]})"}) {
    ExpectResponsesInvalid(body, "unsupported_parameter", "");
  }
  // Every field of OpenAI's Responses request is in the table.
  std::set<std::string> listed;
  for (const FieldRule& rule : ResponsesFields()) EXPECT_TRUE(listed.insert(rule.name).second) << rule.name;
  for (const char* field :
       {"background", "conversation", "include", "input", "instructions", "max_output_tokens", "max_tool_calls",
        "metadata", "model", "parallel_tool_calls", "previous_response_id", "prompt", "prompt_cache_key",
        "prompt_cache_retention", "reasoning", "safety_identifier", "service_tier", "store", "stream",
        "stream_options", "temperature", "text", "tool_choice", "tools", "top_logprobs", "top_p", "truncation",
        "user"}) {
    EXPECT_TRUE(listed.count(field)) << field << " is not in ResponsesFields()";
  }
  // What the clients send, and the defaults spelt out, pass.
  auto ok = ParseResponsesRequest(R"({"model": "m", "input": "x", "store": false, "include": [],
      "truncation": "disabled", "top_logprobs": 0, "background": false, "service_tier": "default",
      "prompt_cache_key": "qwen-code:1", "metadata": {"a": "b"}, "user": null})");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->chat.request.prompt_cache_key(), "qwen-code:1");
  // A result under an id no earlier function_call has.
  ExpectResponsesInvalid(R"({"model": "m", "instructions": "s", "input": [
      {"role": "user", "content": "hi"},
      {"type": "function_call", "call_id": "call_a", "name": "f", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "call_zzz", "output": "r"}]})",
                         "unknown_tool_call_id", "input[2].call_id: 'call_zzz'");
}

// ---- Responses API responses -----------------------------------------------------------

struct SseEvent {
  std::string name;  // the `event:` line
  Value data;
};

std::vector<SseEvent> ParseSse(const std::string& sse) {
  std::vector<SseEvent> out;
  std::string name;
  std::istringstream in(sse);
  for (std::string line; std::getline(in, line);) {
    if (absl::StartsWith(line, "event: ")) name = line.substr(7);
    if (absl::StartsWith(line, "data: ")) {
      auto data = json::Parse(line.substr(6));
      EXPECT_TRUE(data.ok()) << line;
      out.push_back({name, data.ok() ? *data : Value()});
    }
  }
  return out;
}

TEST(ResponsesResponse, StreamedAndNonStreamedAgree) {
  for (bool with_calls : {false, true}) {
    Value echo = Value::EmptyObject();
    echo.Set("max_output_tokens", Value::Int(99));
    ResponsesRenderer streamed("resp_1", "m", 1700000000, echo);
    ResponsesRenderer whole("resp_1", "m", 1700000000, echo);
    std::string sse = streamed.Start();
    for (const auto& e : SampleEvents(with_calls)) {
      sse += streamed.OnEvent(e);
      whole.OnEvent(e);
    }
    ASSERT_TRUE(whole.finished());
    ASSERT_TRUE(whole.error().ok());
    std::vector<SseEvent> events = ParseSse(sse);
    std::vector<std::string> types;
    for (size_t i = 0; i < events.size(); ++i) {
      EXPECT_EQ(events[i].name, events[i].data.Find("type")->as_string());
      EXPECT_EQ(events[i].data.Find("sequence_number")->as_int64(), static_cast<int64_t>(i));
      types.push_back(events[i].name);
    }
    std::vector<std::string> expected = {
        "response.created", "response.in_progress",
        "response.output_item.added", "response.reasoning_text.delta",
        "response.reasoning_text.done", "response.output_item.done",
        "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.delta",
        "response.output_text.done", "response.content_part.done", "response.output_item.done"};
    if (with_calls) {
      for (int i = 0; i < 2; ++i) {
        for (const char* t : {"response.output_item.added", "response.function_call_arguments.delta",
                              "response.function_call_arguments.done", "response.output_item.done"}) {
          expected.push_back(t);
        }
      }
    }
    expected.push_back("response.completed");
    EXPECT_EQ(types, expected);
    // The items the stream finished equal the non-streamed output, and the final event
    // carries the whole response object.
    Value items = Value::EmptyArray();
    std::string text;
    for (const auto& e : events) {
      if (e.name == "response.output_item.done") items.Append(*e.data.Find("item"));
      if (e.name == "response.output_text.delta") text += e.data.Find("delta")->as_string();
    }
    Value response = whole.ResponseJson();
    EXPECT_EQ(items, *response.Find("output")) << json::DumpCompact(items);
    EXPECT_EQ(*events.back().data.Find("response"), response);
    EXPECT_EQ(text, "Hello, world \"quoted\"");
    EXPECT_EQ(response.Find("status")->as_string(), "completed");
    EXPECT_EQ(response.Find("max_output_tokens")->as_int64(), 99);
    EXPECT_EQ(response.Find("usage")->Find("input_tokens")->as_int64(), 11);
    EXPECT_EQ(response.Find("usage")->Find("output_tokens")->as_int64(), 7);
    EXPECT_EQ(response.Find("usage")->Find("total_tokens")->as_int64(), 18);
    EXPECT_EQ(response.Find("usage")->Find("input_tokens_details")->Find("cached_tokens")->as_int64(), 3);
    const auto& output = response.Find("output")->items();
    ASSERT_EQ(output.size(), with_calls ? 4u : 2u);
    EXPECT_EQ(output[0].Find("content")->items()[0].Find("text")->as_string(), "thinking");
    if (with_calls) {
      EXPECT_EQ(output[2].Find("type")->as_string(), "function_call");
      EXPECT_EQ(output[2].Find("call_id")->as_string(), "call_000000000000000000000000");
      EXPECT_EQ(output[2].Find("name")->as_string(), "read");
      EXPECT_EQ(output[2].Find("arguments")->as_string(), R"({"path":"a b"})");
      EXPECT_EQ(output[3].Find("name")->as_string(), "glob");
      // The first event of a call already names it and its id.
      for (const auto& e : events) {
        if (e.name != "response.output_item.added") continue;
        const Value& item = *e.data.Find("item");
        if (item.Find("type")->as_string() != "function_call") continue;
        EXPECT_FALSE(item.Find("call_id")->as_string().empty());
        EXPECT_FALSE(item.Find("name")->as_string().empty());
      }
    }
  }
}

TEST(ResponsesResponse, LengthIsIncompleteAndErrorIsOneFailedEvent) {
  v1::StreamEvent text;
  text.mutable_text()->set_text("partial");
  v1::StreamEvent length;
  length.mutable_terminal()->set_finish_reason(v1::FINISH_LENGTH);
  ResponsesRenderer capped("resp_2", "m", 1, Value::EmptyObject());
  std::string sse = capped.Start();  // one call per statement: the order matters
  sse += capped.OnEvent(text);
  sse += capped.OnEvent(length);
  std::vector<SseEvent> events = ParseSse(sse);
  EXPECT_EQ(events.back().name, "response.incomplete");
  EXPECT_EQ(capped.ResponseJson().Find("incomplete_details")->Find("reason")->as_string(),
            "max_output_tokens");

  v1::StreamEvent lost;
  lost.mutable_terminal()->set_finish_reason(v1::FINISH_ERROR);
  lost.mutable_terminal()->mutable_status()->set_code("UNAVAILABLE");
  lost.mutable_terminal()->mutable_status()->set_reason("worker_lost");
  lost.mutable_terminal()->mutable_status()->set_message("the worker died");
  ResponsesRenderer failed("resp_3", "m", 1, Value::EmptyObject());
  sse = failed.Start();
  sse += failed.OnEvent(text);
  sse += failed.OnEvent(lost);
  sse += failed.OnEvent(text);  // nothing after the terminal event
  events = ParseSse(sse);
  int terminal_events = 0;
  for (const auto& e : events) {
    terminal_events += e.name == "response.failed" || e.name == "response.completed" ||
                       e.name == "response.incomplete" || e.name == "error";
  }
  EXPECT_EQ(terminal_events, 1);
  ASSERT_EQ(events.back().name, "response.failed");
  const Value& response = *events.back().data.Find("response");
  EXPECT_EQ(response.Find("status")->as_string(), "failed");
  EXPECT_EQ(response.Find("error")->Find("code")->as_string(), "worker_lost");
  EXPECT_EQ(ReasonOf(failed.error()), "worker_lost");
}

TEST(ChatResponse, Models) {
  Value list = ModelListJson({{"a", 4096, 256}, {"b", 32768, 1024}}, 5);
  EXPECT_EQ(json::DumpCompact(list),
            R"({"object":"list","data":[{"id":"a","object":"model","created":5,"owned_by":"gantry",)"
            R"("context_length":4096,"max_output_tokens":256},)"
            R"({"id":"b","object":"model","created":5,"owned_by":"gantry",)"
            R"("context_length":32768,"max_output_tokens":1024}]})");
}

// response_format / text.format: the three formats, mapped to what the worker
// constrains; a schema's errors name its field.
TEST(OpenAiTest, OutputFormatsMapToTheWorkersConstraint) {
  const std::string base = R"({"model": "m", "messages": [{"role": "user", "content": "x"}], )";
  auto object = ParseChatCompletionRequest(base + R"("response_format": {"type": "json_object"}})");
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_EQ(object->request.response_format().type(), v1::OUTPUT_JSON_OBJECT);
  auto schema = ParseChatCompletionRequest(base + R"("response_format": {"type": "json_schema",
      "json_schema": {"name": "person", "strict": true,
                      "schema": {"type": "object", "properties": {"age": {"type": "integer"}},
                                 "required": ["age"], "additionalProperties": false}}}})");
  ASSERT_TRUE(schema.ok()) << schema.status();
  const v1::ResponseFormat& f = schema->request.response_format();
  EXPECT_EQ(f.type(), v1::OUTPUT_JSON_SCHEMA);
  EXPECT_EQ(f.name(), "person");
  EXPECT_TRUE(f.strict());
  EXPECT_EQ(f.schema_json(),
            R"({"type":"object","properties":{"age":{"type":"integer"}},"required":["age"],"additionalProperties":false})");
  auto text = ParseChatCompletionRequest(base + R"("response_format": {"type": "text"}})");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->request.response_format().type(), v1::OUTPUT_TEXT);
  for (const auto& [json, param] : std::vector<std::pair<std::string, std::string>>{
           {R"("response_format": {"type": "json_schema"})", "response_format.json_schema"},
           {R"("response_format": {"type": "json_schema", "json_schema": {"schema": {}}})",
            "response_format.json_schema.name"},
           {R"("response_format": {"type": "json_schema", "json_schema": {"name": "a b", "schema": {}}})",
            "response_format.json_schema.name"},
           {R"("response_format": {"type": "json_schema", "json_schema": {"name": "a"}})",
            "response_format.json_schema.schema"},
           {R"("response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": 5}}})",
            "response_format.json_schema.schema"},
           {R"("response_format": {"type": "json_object", "schema": {}})", "response_format.schema"}}) {
    auto refused = ParseChatCompletionRequest(base + json + "}");
    EXPECT_FALSE(refused.ok()) << json;
    EXPECT_EQ(ParamOf(refused.status()), param) << json << ": " << refused.status();
    EXPECT_EQ(HttpStatusFor(refused.status()), 400);
  }
  // The Responses API's flat form, echoed in the response object.
  auto responses = ParseResponsesRequest(R"({"model": "m", "input": "x", "text": {"format":
      {"type": "json_schema", "name": "n", "schema": {"enum": [1, 2]}}}})");
  ASSERT_TRUE(responses.ok()) << responses.status();
  EXPECT_EQ(responses->chat.request.response_format().type(), v1::OUTPUT_JSON_SCHEMA);
  EXPECT_EQ(responses->chat.request.response_format().schema_json(), R"({"enum":[1,2]})");
  ASSERT_NE(responses->echo.Find("text"), nullptr);
}

}  // namespace
}  // namespace gantry::openai
