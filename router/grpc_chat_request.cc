#include "router/grpc_chat_request.h"

#include <cmath>
#include <initializer_list>
#include <set>
#include <utility>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/message.h"
#include "google/protobuf/unknown_field_set.h"
#include "common/json.h"
#include "common/utf8.h"
#include "router/openai/request_fields.h"

namespace gantry::router {
namespace {

using openai::Invalid;

absl::Status CheckText(const std::string& text, const std::string& path) {
  return IsValidUtf8(text) ? absl::OkStatus() : Invalid(path, "not valid UTF-8");
}

// `text` must be JSON whose root is an object when `object` is set; compacted in place.
absl::Status CheckJson(std::string* text, const std::string& path, bool object) {
  auto parsed = json::Parse(*text);
  if (!parsed.ok()) return Invalid(path, "not valid JSON");
  if (object && !parsed->is_object()) return Invalid(path, "expected a JSON object");
  *text = json::DumpCompact(*parsed);
  return absl::OkStatus();
}

absl::Status CheckRange(bool has, float value, double lo, double hi, absl::string_view path) {
  if (!has) return absl::OkStatus();
  if (!(value >= lo && value <= hi)) {  // NaN fails both comparisons
    return Invalid(path, absl::StrCat("must be in [", lo, ", ", hi, "]"));
  }
  return absl::OkStatus();
}

absl::Status CheckMessage(v1::ChatMessage* m, const std::string& path) {
  const std::string& role = m->role();
  if (role == "developer") m->set_role("system");
  if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
    return Invalid(path + ".role", "must be system, user, assistant, tool or developer");
  }
  for (const auto& [text, field] : {std::pair{&m->content(), ".content"},
                                    std::pair{&m->reasoning_content(), ".reasoning_content"},
                                    std::pair{&m->name(), ".name"}}) {
    if (auto s = CheckText(*text, path + field); !s.ok()) return s;
  }
  if (role == "tool" && m->tool_call_id().empty()) {
    return Invalid(path + ".tool_call_id", "required on tool messages");
  }
  if (m->content_null() && role != "assistant" && role != "tool") {
    return Invalid(path + ".content_null", "only assistant and tool messages may have no content");
  }
  if (role != "assistant" && m->tool_calls_size() > 0) {
    return Invalid(path + ".tool_calls", "only assistant messages carry tool calls");
  }
  for (int j = 0; j < m->tool_calls_size(); ++j) {
    v1::ToolCallRef* call = m->mutable_tool_calls(j);
    const std::string at = absl::StrCat(path, ".tool_calls[", j, "]");
    if (call->id().empty() || !IsValidUtf8(call->id())) {
      return Invalid(at + ".id", "required, UTF-8");
    }
    if (!openai::IsValidToolName(call->name())) {
      return Invalid(at + ".name", "must be 1-64 of a-z, A-Z, 0-9, _ . -");
    }
    if (call->arguments_json().empty()) call->set_arguments_json("{}");
    if (auto s = CheckJson(call->mutable_arguments_json(), at + ".arguments_json", true);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// The first field of `m` (or of a message inside it) that protobuf did not know, as
// "PATH.#NUMBER"; "" when there is none. A field from a later gantry.v1 is refused,
// never dropped unread.
std::string UnknownField(const google::protobuf::Message& m, const std::string& path) {
  const google::protobuf::Reflection* r = m.GetReflection();
  const google::protobuf::UnknownFieldSet& unknown = r->GetUnknownFields(m);
  if (!unknown.empty()) return absl::StrCat(path, ".#", unknown.field(0).number());
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const google::protobuf::FieldDescriptor* f : fields) {
    if (f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    const std::string at = absl::StrCat(path, ".", f->name());
    if (!f->is_repeated()) {
      if (std::string u = UnknownField(r->GetMessage(m, f), at); !u.empty()) return u;
      continue;
    }
    for (int i = 0; i < r->FieldSize(m, f); ++i) {
      if (std::string u = UnknownField(r->GetRepeatedMessage(m, f, i), absl::StrCat(at, "[", i, "]")); !u.empty()) {
        return u;
      }
    }
  }
  return "";
}

}  // namespace

absl::StatusOr<GrpcChat> CheckGrpcChatRequest(const v1::ChatRequest& chat) {
  if (std::string unknown = UnknownField(chat, ""); !unknown.empty()) {
    return openai::Unsupported(unknown.substr(1), "a field this router does not know (a later gantry.v1?)");
  }
  if (!chat.has_request()) return Invalid("request", "required");
  GrpcChat out;
  out.include_usage = chat.include_usage();
  v1::InferenceRequest& req = out.request;
  req = chat.request();
  // The router's own fields: a client's value would be overwritten, so it is refused.
  // (The deadline is the call's gRPC deadline; the priority the key's.)
  for (const auto& [set, field] : std::initializer_list<std::pair<bool, const char*>>{
           {!req.request_id().empty(), "request.request_id"},
           {!req.principal().empty(), "request.principal"},
           {req.priority() != v1::PRIORITY_INTERACTIVE, "request.priority"},
           {req.deadline_unix_ms() != 0, "request.deadline_unix_ms"},
           {req.router_prompt_tokens() != 0, "request.router_prompt_tokens"},
           {req.special_tokens_in_content(), "request.special_tokens_in_content"}}) {
    if (set) return openai::Unsupported(field, "set by the router (from the call, the key and the policy), not the client");
  }
  if (req.model().empty() || !IsValidUtf8(req.model())) {
    return Invalid("request.model", "required");
  }
  if (req.prompt_cache_key().size() > 256 || !IsValidUtf8(req.prompt_cache_key())) {
    return Invalid("request.prompt_cache_key", "at most 256 bytes of UTF-8");
  }
  if (auto format = openai::CheckResponseFormat(req.response_format(), "request.response_format"); !format.ok()) {
    return format;
  }
  if (req.messages_size() == 0) return Invalid("request.messages", "at least one message");
  for (int i = 0; i < req.messages_size(); ++i) {
    auto s = CheckMessage(req.mutable_messages(i), absl::StrCat("request.messages[", i, "]"));
    if (!s.ok()) return s;
  }
  std::set<std::string> names;
  for (int i = 0; i < req.tools_size(); ++i) {
    v1::ToolDefinition* tool = req.mutable_tools(i);
    const std::string at = absl::StrCat("request.tools[", i, "]");
    if (!openai::IsValidToolName(tool->name())) {
      return Invalid(at + ".name", "must be 1-64 of a-z, A-Z, 0-9, _ . -");
    }
    if (!names.insert(tool->name()).second) {
      return Invalid(at + ".name", absl::StrCat("duplicate tool ", openai::Quoted(tool->name())));
    }
    if (auto s = CheckText(tool->description(), at + ".description"); !s.ok()) return s;
    if (!tool->parameters_json().empty()) {
      auto s = CheckJson(tool->mutable_parameters_json(), at + ".parameters_json", true);
      if (!s.ok()) return s;
    }
  }
  if (!v1::ToolChoiceMode_IsValid(req.tool_choice())) {
    return openai::Unsupported("request.tool_choice", absl::StrCat("no tool choice mode ", req.tool_choice()));
  }
  if ((req.tool_choice() == v1::TOOL_CHOICE_REQUIRED || req.tool_choice() == v1::TOOL_CHOICE_NAMED) &&
      req.tools_size() == 0) {
    return Invalid("request.tool_choice", "required and named need tools");
  }
  if (req.tool_choice() == v1::TOOL_CHOICE_NAMED && names.count(req.tool_choice_name()) == 0) {
    return Invalid("request.tool_choice_name", "must name one of the tools");
  }
  if (req.tool_choice() != v1::TOOL_CHOICE_NAMED && !req.tool_choice_name().empty()) {
    return Invalid("request.tool_choice_name", "only with tool_choice TOOL_CHOICE_NAMED");
  }
  for (int i = 0; i < req.stop_size(); ++i) {
    auto s = CheckText(req.stop(i), absl::StrCat("request.stop[", i, "]"));
    if (!s.ok()) return s;
  }
  const v1::SamplingParams& p = req.sampling();
  for (const absl::Status& s :
       {CheckRange(p.has_temperature(), p.temperature(), 0, 2, "request.sampling.temperature"),
        CheckRange(p.has_top_p(), p.top_p(), 0, 1, "request.sampling.top_p"),
        CheckRange(p.has_min_p(), p.min_p(), 0, 1, "request.sampling.min_p"),
        CheckRange(p.has_repetition_penalty(), p.repetition_penalty(), 0.01, 10,
                   "request.sampling.repetition_penalty"),
        CheckRange(p.has_presence_penalty(), p.presence_penalty(), -2, 2, "request.sampling.presence_penalty"),
        CheckRange(p.has_frequency_penalty(), p.frequency_penalty(), -2, 2, "request.sampling.frequency_penalty")}) {
    if (!s.ok()) return s;
  }
  if (p.logit_bias_size() > static_cast<int>(openai::kMaxLogitBias)) {
    return Invalid("request.sampling.logit_bias", absl::StrCat("at most ", openai::kMaxLogitBias, " token ids"));
  }
  for (const auto& [id, bias] : p.logit_bias()) {
    auto s = CheckRange(true, bias, -100, 100, absl::StrCat("request.sampling.logit_bias[", id, "]"));
    if (!s.ok()) return s;
  }
  if (p.has_top_k() && p.top_k() > (1u << 20)) {
    return Invalid("request.sampling.top_k", "must be at most 1048576");
  }
  const std::string& effort = req.reasoning_effort();
  if (!effort.empty() && effort != "low" && effort != "medium" && effort != "high") {
    return Invalid("request.reasoning_effort", "must be \"\", low, medium or high");
  }
  for (auto& [key, value] : *req.mutable_template_kwargs_json()) {
    const std::string at = absl::StrCat("request.template_kwargs_json[", openai::Quoted(key), "]");
    if (auto s = CheckText(key, at); !s.ok()) return s;
    if (auto s = CheckJson(&value, at, false); !s.ok()) return s;
  }
  auto replay = openai::CheckToolReplay(
      req, [](int i) { return absl::StrCat("request.messages[", i, "].tool_call_id"); });
  if (!replay.ok()) return replay;
  out.has_max_tokens = req.max_tokens() > 0;
  return out;
}

}  // namespace gantry::router
