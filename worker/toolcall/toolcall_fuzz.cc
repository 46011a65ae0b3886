// Fuzz target: the tool-call stream (parser + validation) over arbitrary model text, with a
// fixed tool set. Input: [control byte][frames as in tests/fuzz/fuzz_input.h]; the control
// byte picks the protocol, reasoning options and the call policy; each frame is a delta.
// Invariants: nothing crashes; emitted text is valid UTF-8; calls carry valid ids and JSON
// object arguments; the events and the error reason do not depend on how the text was split
// (the frames are also fed joined, as one delta).
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/json.h"
#include "common/status.h"
#include "common/utf8.h"
#include "tests/fuzz/fuzz_input.h"
#include "worker/toolcall/tool_call_stream.h"

namespace {

using namespace gantry;
using namespace gantry::toolcall;

const std::shared_ptr<const ToolSet>& Tools() {
  static const std::shared_ptr<const ToolSet> tools = [] {
    google::protobuf::RepeatedPtrField<v1::ToolDefinition> defs;
    auto add = [&](const char* name, const char* schema) {
      v1::ToolDefinition* d = defs.Add();
      d->set_name(name);
      d->set_parameters_json(schema);
    };
    add("bash", R"({"type":"object","properties":{"command":{"type":"string"},
        "timeout":{"type":"integer","exclusiveMinimum":0,"maximum":9007199254740991}},
        "required":["command"]})");
    add("read_file", R"({"type":"object","properties":{"file_path":{"type":"string"},
        "offset":{"type":["integer","null"]},"limit":{"type":["integer","null"]}},
        "required":["file_path"]})");
    add("agent", R"({"type":"object","properties":{"fork_turns":{"oneOf":[
        {"type":"string","enum":["all"]},{"type":"string","pattern":"^[1-9][0-9]*$"}]},
        "tools":{"type":"array","items":{"type":"string","minLength":1},"maxItems":4},
        "bg":{"type":"boolean"},"n":{"type":"number"}},"additionalProperties":false})");
    add("get_goal", "");
    auto set = ToolSet::Compile(defs);
    if (!set.ok()) std::abort();  // the fixed set is ours: a bug if it does not compile
    return std::make_shared<const ToolSet>(*std::move(set));
  }();
  return tools;
}

struct Result {
  std::vector<std::string> events;
  std::string reason;
};

void Append(const v1::StreamEvent& event, Result* result) {
  auto join = [&](char kind, const std::string& text) {
    if (!IsValidUtf8(text) || text.empty()) std::abort();
    if (!result->events.empty() && result->events.back()[0] == kind) {
      result->events.back() += text;
    } else {
      result->events.push_back(std::string(1, kind) + text);
    }
  };
  if (event.has_text()) {
    join('t', event.text().text());
  } else if (event.has_reasoning()) {
    join('r', event.reasoning().text());
  } else if (event.has_tool_call()) {
    const v1::ToolCallRef& call = event.tool_call().call();
    if (!IsValidId(call.id(), "call")) std::abort();
    auto arguments = json::Parse(call.arguments_json());
    if (!arguments.ok() || !arguments->is_object()) std::abort();
    result->events.push_back("c" + std::to_string(event.tool_call().index()) + call.name() + " " +
                             call.arguments_json());
  } else {
    std::abort();
  }
}

Result RunOnce(ToolProtocol protocol, const ParserOptions& options, const ToolCallPolicy& policy,
               const std::vector<std::string>& deltas) {
  ToolCallStream stream(protocol, options, Tools(), policy);
  std::vector<v1::StreamEvent> events;
  absl::Status status;
  for (const std::string& delta : deltas) {
    status = stream.Feed(delta, &events);
    if (!status.ok()) break;
  }
  if (status.ok()) status = stream.Finish(&events);
  Result result;
  for (const v1::StreamEvent& event : events) Append(event, &result);
  result.reason = status.ok() ? "" : ReasonOf(status);
  if (!status.ok() && result.reason != "invalid_tool_call" &&
      result.reason != "too_many_tool_calls") {
    std::abort();
  }
  return result;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t control = data[0];
  static constexpr ToolProtocol kProtocols[] = {
      ToolProtocol::kHermesJson, ToolProtocol::kQwen3CoderXml, ToolProtocol::kLlama31Json,
      ToolProtocol::kMistralToolCalls};
  ToolProtocol protocol = kProtocols[control & 3];
  ParserOptions options;
  options.reasoning = (control >> 2) & 1;
  options.starts_in_reasoning = (control >> 3) & 1;
  options.max_call_bytes = 4096;
  ToolCallPolicy policy;
  policy.parallel_tool_calls = !((control >> 4) & 1);
  static constexpr v1::ToolChoiceMode kChoices[] = {
      v1::TOOL_CHOICE_AUTO, v1::TOOL_CHOICE_NONE, v1::TOOL_CHOICE_REQUIRED, v1::TOOL_CHOICE_NAMED};
  policy.tool_choice = kChoices[(control >> 5) & 3];
  policy.tool_choice_name = "bash";
  policy.max_tool_calls = (control >> 7) & 1 ? 2 : 0;

  std::vector<std::string> deltas = gantry::fuzz::SplitFrames(data + 1, size - 1);
  std::string whole;
  for (const std::string& delta : deltas) whole += delta;
  Result split = RunOnce(protocol, options, policy, deltas);
  Result joined = RunOnce(protocol, options, policy, {whole});
  if (split.events != joined.events || split.reason != joined.reason) std::abort();
  return 0;
}
