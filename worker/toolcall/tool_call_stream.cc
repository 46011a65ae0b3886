#include "worker/toolcall/tool_call_stream.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/error_codes.h"
#include "common/ids.h"
#include "common/status.h"

namespace gantry::toolcall {
namespace {

const char* ChoiceName(v1::ToolChoiceMode mode) {
  switch (mode) {
    case v1::TOOL_CHOICE_NONE: return "none";
    case v1::TOOL_CHOICE_REQUIRED: return "required";
    case v1::TOOL_CHOICE_NAMED: return "named";
    default: return "auto";
  }
}

std::string AdvertisedList(const ToolSet& tools) {
  std::vector<std::string> names;
  for (const std::string& name : tools.names()) {
    if (names.size() == 12) {
      names.push_back("...");
      break;
    }
    names.push_back(name);
  }
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

}  // namespace

ToolCallPolicy ToolCallPolicy::FromRequest(const v1::InferenceRequest& request) {
  ToolCallPolicy policy;
  policy.tool_choice = request.tool_choice();
  policy.tool_choice_name = request.tool_choice_name();
  policy.parallel_tool_calls = !request.has_parallel_tool_calls() || request.parallel_tool_calls();
  policy.max_tool_calls = request.max_tool_calls();
  return policy;
}

uint32_t ToolCallPolicy::CallLimit() const {
  uint32_t limit = parallel_tool_calls ? 0 : 1;
  if (max_tool_calls > 0 && (limit == 0 || max_tool_calls < limit)) limit = max_tool_calls;
  return limit;
}

absl::StatusOr<std::unique_ptr<ToolCallStream>> ToolCallStream::Create(
    ToolProtocol protocol, const v1::InferenceRequest& request, ParserOptions options) {
  if (protocol == ToolProtocol::kNone && request.tools_size() > 0) {
    return ReasonError("tool_protocol_undeclared",
                       absl::StrCat("the request advertises ", request.tools_size(),
                                    " tools, but the model's bundle declares no tool-call "
                                    "protocol; send the request without tools"));
  }
  GANTRY_ASSIGN_OR_RETURN(ToolSet compiled, ToolSet::Compile(request.tools()));
  auto tools = std::make_shared<const ToolSet>(std::move(compiled));
  ToolCallPolicy policy = ToolCallPolicy::FromRequest(request);
  bool forced =
      policy.tool_choice == v1::TOOL_CHOICE_REQUIRED || policy.tool_choice == v1::TOOL_CHOICE_NAMED;
  if (forced && tools->empty()) {
    return ReasonError("invalid_request",
                       absl::StrCat("tool_choice \"", ChoiceName(policy.tool_choice),
                                    "\" needs advertised tools"));
  }
  if (policy.tool_choice == v1::TOOL_CHOICE_NAMED &&
      tools->Find(policy.tool_choice_name) == nullptr) {
    return ReasonError("invalid_request",
                       absl::StrCat("tool_choice names \"", policy.tool_choice_name,
                                    "\", which is not an advertised tool"));
  }
  // Calls are looked for whenever the bundle declares a protocol, tools offered or not:
  // a call written as text when none is offered (every offered tool stripped by the
  // router's policy, say) would otherwise reach a client as plain content that some
  // clients parse and run. Such a call is not an advertised tool: invalid_tool_call.
  options.parse_calls = protocol != ToolProtocol::kNone;
  return std::make_unique<ToolCallStream>(protocol, options, std::move(tools), std::move(policy));
}

ToolCallStream::ToolCallStream(ToolProtocol protocol, const ParserOptions& options,
                               std::shared_ptr<const ToolSet> tools, ToolCallPolicy policy,
                               std::function<std::string()> new_id)
    : tools_(std::move(tools)),
      policy_(std::move(policy)),
      new_id_(new_id ? std::move(new_id) : [] { return NewId("call"); }),
      parser_(protocol, options, [tools = tools_](absl::string_view name, absl::string_view key) {
        return tools->ParameterTypes(name, key);
      }) {}

absl::Status ToolCallStream::Feed(absl::string_view delta, std::vector<v1::StreamEvent>* out) {
  if (!failure_.ok()) return failure_;
  std::vector<ParsedEvent> events;
  absl::Status parsed = parser_.Feed(delta, &events);
  return Consume(std::move(parsed), &events, out);
}

absl::Status ToolCallStream::Finish(std::vector<v1::StreamEvent>* out) {
  if (!failure_.ok()) return failure_;
  std::vector<ParsedEvent> events;
  absl::Status parsed = parser_.Finish(&events);
  GANTRY_RETURN_IF_ERROR(Consume(std::move(parsed), &events, out));
  if (calls_ == 0 && (policy_.tool_choice == v1::TOOL_CHOICE_REQUIRED ||
                      policy_.tool_choice == v1::TOOL_CHOICE_NAMED)) {
    failure_ = ReasonError(
        "invalid_tool_call",
        policy_.tool_choice == v1::TOOL_CHOICE_REQUIRED
            ? std::string("tool_choice is \"required\" but the model made no tool call")
            : absl::StrCat("tool_choice requires a call to \"", policy_.tool_choice_name,
                           "\" but the model made no tool call"));
    return failure_;
  }
  return absl::OkStatus();
}

absl::Status ToolCallStream::Consume(absl::Status parsed, std::vector<ParsedEvent>* events,
                                     std::vector<v1::StreamEvent>* out) {
  // Events decided before a parse error (text before a malformed call) still go out.
  for (ParsedEvent& event : *events) {
    switch (event.kind) {
      case ParsedEvent::Kind::kText:
        out->emplace_back().mutable_text()->set_text(std::move(event.text));
        break;
      case ParsedEvent::Kind::kReasoning:
        out->emplace_back().mutable_reasoning()->set_text(std::move(event.text));
        break;
      case ParsedEvent::Kind::kCall:
        failure_ = AcceptCall(std::move(event.call), out);
        if (!failure_.ok()) return failure_;
        break;
    }
  }
  if (!parsed.ok()) {
    failure_ =
        ReasonError(ReasonOf(parsed), absl::StrCat("tool call ", calls_, ": ", parsed.message()));
    return failure_;
  }
  return absl::OkStatus();
}

absl::Status ToolCallStream::AcceptCall(RawToolCall call, std::vector<v1::StreamEvent>* out) {
  const uint32_t index = calls_;
  const std::string label = absl::StrCat("tool call ", index, " (\"", call.name, "\")");
  if (policy_.tool_choice == v1::TOOL_CHOICE_NONE) {
    return ReasonError(
        "invalid_tool_call",
        absl::StrCat(label, ": tool_choice is \"none\" but the model called a tool"));
  }
  uint32_t limit = policy_.CallLimit();
  if (limit != 0 && index >= limit) {
    return ReasonError(
        "too_many_tool_calls",
        absl::StrCat("the model made more than ", limit, " tool call", limit == 1 ? "" : "s", " (",
                     policy_.parallel_tool_calls
                         ? absl::StrCat("max_tool_calls is ", policy_.max_tool_calls)
                         : std::string("parallel_tool_calls is false"),
                     "); ", label, " is one too many"));
  }
  if (policy_.tool_choice == v1::TOOL_CHOICE_NAMED && call.name != policy_.tool_choice_name) {
    return ReasonError("invalid_tool_call", absl::StrCat(label, ": tool_choice requires \"",
                                                         policy_.tool_choice_name, "\""));
  }
  if (tools_->Find(call.name) == nullptr) {
    return ReasonError("invalid_tool_call",
                       absl::StrCat(label, ": not an advertised tool (advertised: ",
                                    AdvertisedList(*tools_), ")"));
  }
  absl::Status valid = tools_->ValidateArguments(call.name, call.arguments);
  if (!valid.ok()) {
    return ReasonError("invalid_tool_call",
                       absl::StrCat("tool call ", index, ": ", valid.message()));
  }
  v1::ToolCallEvent* event = out->emplace_back().mutable_tool_call();
  event->set_index(index);
  v1::ToolCallRef* ref = event->mutable_call();
  ref->set_id(new_id_());
  ref->set_name(std::move(call.name));
  ref->set_arguments_json(json::DumpCompact(call.arguments));
  ++calls_;
  return absl::OkStatus();
}

}  // namespace gantry::toolcall
