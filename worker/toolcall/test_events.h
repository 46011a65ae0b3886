// Test helpers: run a ToolCallStream over deltas and describe what came out as strings
// ("text:...", "reasoning:...", "call 0 read {...}", then "error reason: message").
#ifndef GANTRY_WORKER_TOOLCALL_TEST_EVENTS_H_
#define GANTRY_WORKER_TOOLCALL_TEST_EVENTS_H_

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/ids.h"
#include "common/json.h"
#include "common/status.h"
#include "gtest/gtest.h"
#include "worker/toolcall/tool_call_stream.h"

namespace gantry::toolcall::toolcall_testing {

// The tools a real client advertises ("opencode/chat", "qwen-code/chat-yolo", ...), from
// tests/data/toolcall/tool_schemas.json.
inline google::protobuf::RepeatedPtrField<v1::ToolDefinition> ClientTools(
    const std::string& client) {
  std::ifstream in("tests/data/toolcall/tool_schemas.json");
  std::stringstream text;
  text << in.rdbuf();
  auto all = json::Parse(text.str());
  google::protobuf::RepeatedPtrField<v1::ToolDefinition> tools;
  if (!all.ok() || all->Find(client) == nullptr) {
    ADD_FAILURE() << "no tools for " << client;
    return tools;
  }
  for (const json::Value& tool : all->Find(client)->items()) {
    v1::ToolDefinition* definition = tools.Add();
    definition->set_name(tool.Find("name")->as_string());
    const json::Value* parameters = tool.Find("parameters");
    if (parameters != nullptr && parameters->is_object()) {
      definition->set_parameters_json(json::DumpCompact(*parameters));
    }
  }
  return tools;
}

// opencode's tools plus Qwen Code's (yolo) under their own names where they differ.
inline std::shared_ptr<const ToolSet> TestTools() {
  auto tools = ClientTools("opencode/chat");
  for (const v1::ToolDefinition& tool : ClientTools("qwen-code/chat-yolo")) {
    bool taken = false;
    for (const v1::ToolDefinition& have : tools) taken = taken || have.name() == tool.name();
    if (!taken) *tools.Add() = tool;
  }
  auto set = ToolSet::Compile(tools);
  EXPECT_TRUE(set.ok()) << set.status();
  return std::make_shared<const ToolSet>(set.ok() ? *std::move(set) : ToolSet());
}

struct Outcome {
  std::vector<std::string> events;
  std::string error_reason;  // "" when the stream ended OK
  std::string error;         // "reason: message"
};

inline void AppendEvent(const v1::StreamEvent& event, std::vector<std::string>* out) {
  auto join = [&](const std::string& prefix, const std::string& text) {
    if (!out->empty() && out->back().rfind(prefix, 0) == 0) {
      out->back() += text;  // adjacent deltas of one kind are one text
    } else {
      out->push_back(prefix + text);
    }
  };
  if (event.has_text()) {
    join("text:", event.text().text());
  } else if (event.has_reasoning()) {
    join("reasoning:", event.reasoning().text());
  } else if (event.has_tool_call()) {
    const v1::ToolCallRef& call = event.tool_call().call();
    EXPECT_TRUE(IsValidId(call.id(), "call")) << call.id();
    out->push_back(absl::StrCat("call ", event.tool_call().index(), " ", call.name(), " ",
                                call.arguments_json()));
  } else {
    ADD_FAILURE() << "unexpected event " << event.ShortDebugString();
  }
}

inline Outcome RunStream(ToolProtocol protocol, const ParserOptions& options,
                         const ToolCallPolicy& policy, const std::vector<std::string>& deltas,
                         std::shared_ptr<const ToolSet> tools = nullptr) {
  ToolCallStream stream(protocol, options, tools ? tools : TestTools(), policy);
  Outcome outcome;
  std::vector<v1::StreamEvent> events;
  absl::Status status;
  for (const std::string& delta : deltas) {
    status = stream.Feed(delta, &events);
    if (!status.ok()) break;
  }
  if (status.ok()) status = stream.Finish(&events);
  for (const v1::StreamEvent& event : events) AppendEvent(event, &outcome.events);
  if (!status.ok()) {
    outcome.error_reason = ReasonOf(status);
    outcome.error = absl::StrCat(outcome.error_reason, ": ", status.message());
  }
  return outcome;
}

inline Outcome RunText(ToolProtocol protocol, const std::string& text,
                       const ParserOptions& options = {}, const ToolCallPolicy& policy = {}) {
  return RunStream(protocol, options, policy, {text});
}

// Feeding `text` split at every byte boundary, and byte by byte, gives the same events and
// the same error reason as feeding it whole.
inline void ExpectSplitInvariant(ToolProtocol protocol, const std::string& text,
                                 const ParserOptions& options = {},
                                 const ToolCallPolicy& policy = {}) {
  auto tools = TestTools();
  Outcome whole = RunStream(protocol, options, policy, {text}, tools);
  for (size_t k = 0; k <= text.size(); ++k) {
    Outcome split =
        RunStream(protocol, options, policy, {text.substr(0, k), text.substr(k)}, tools);
    EXPECT_EQ(split.events, whole.events) << "split at " << k << " of " << text;
    EXPECT_EQ(split.error_reason, whole.error_reason) << "split at " << k << " of " << text;
  }
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  Outcome each = RunStream(protocol, options, policy, bytes, tools);
  EXPECT_EQ(each.events, whole.events) << "byte by byte: " << text;
  EXPECT_EQ(each.error_reason, whole.error_reason) << "byte by byte: " << text;
}

}  // namespace gantry::toolcall::toolcall_testing

#endif  // GANTRY_WORKER_TOOLCALL_TEST_EVENTS_H_
