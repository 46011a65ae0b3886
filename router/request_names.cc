#include "router/request_names.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/error_codes.h"

namespace gantry::router {
namespace {

constexpr size_t kMaxModelNameBytes = 256;
constexpr size_t kMaxToolNameBytes = 64;  // OpenAI's limit for function names
constexpr int kMaxTools = 256;
constexpr size_t kMaxKwargNameBytes = 64;
constexpr int kMaxKwargs = 32;
constexpr size_t kMaxEffortBytes = 16;
constexpr size_t kMaxCallIdBytes = 256;  // Gantry's are 29 ("call_" + 24 hex digits)

// A call id: visible ASCII, no spaces (ids other servers issued pass through clients).
bool IsCallId(absl::string_view id) {
  if (id.empty() || id.size() > kMaxCallIdBytes) return false;
  for (char c : id) {
    if (c <= 0x20 || c >= 0x7f) return false;
  }
  return true;
}

bool IsNameChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' ||
         c == '.' || c == ':' || c == '/';
}
bool IsName(absl::string_view name, size_t max_bytes) {
  if (name.empty() || name.size() > max_bytes) return false;
  for (char c : name) {
    if (!IsNameChar(c)) return false;
  }
  return true;
}

}  // namespace

absl::Status CheckRequestNames(const v1::InferenceRequest& req) {
  auto bad = [](absl::string_view what, absl::string_view value, size_t max_bytes) {
    return ReasonError("invalid_request",
                       absl::StrCat(what, " must be 1 to ", max_bytes,
                                    " bytes of letters, digits and _ - . : / (it has ",
                                    value.size(), " bytes)"));
  };
  if (!IsName(req.model(), kMaxModelNameBytes)) return bad("model", req.model(), kMaxModelNameBytes);
  if (req.tools_size() > kMaxTools) {
    return ReasonError("invalid_request", absl::StrCat("at most ", kMaxTools, " tools (",
                                                       req.tools_size(), " sent)"));
  }
  for (const v1::ToolDefinition& tool : req.tools()) {
    if (!IsName(tool.name(), kMaxToolNameBytes)) return bad("a tool name", tool.name(), kMaxToolNameBytes);
  }
  if (!req.tool_choice_name().empty() && !IsName(req.tool_choice_name(), kMaxToolNameBytes)) {
    return bad("tool_choice's name", req.tool_choice_name(), kMaxToolNameBytes);
  }
  if (req.template_kwargs_json_size() > kMaxKwargs) {
    return ReasonError("invalid_request", absl::StrCat("at most ", kMaxKwargs,
                                                       " chat_template_kwargs"));
  }
  for (const auto& [key, value] : req.template_kwargs_json()) {
    if (!IsName(key, kMaxKwargNameBytes)) return bad("a chat_template_kwargs key", key, kMaxKwargNameBytes);
  }
  for (const v1::ChatMessage& m : req.messages()) {
    if (!m.tool_call_id().empty() && !IsCallId(m.tool_call_id())) {
      return ReasonError("invalid_request",
                         absl::StrCat("a tool_call_id must be 1 to ", kMaxCallIdBytes,
                                      " bytes of visible ASCII (it has ",
                                      m.tool_call_id().size(), " bytes)"));
    }
    for (const v1::ToolCallRef& call : m.tool_calls()) {
      if (!IsCallId(call.id())) {
        return ReasonError("invalid_request",
                           absl::StrCat("a tool call's id must be 1 to ", kMaxCallIdBytes,
                                        " bytes of visible ASCII (it has ", call.id().size(),
                                        " bytes)"));
      }
      if (!IsName(call.name(), kMaxToolNameBytes)) return bad("a tool call's name", call.name(), kMaxToolNameBytes);
    }
  }
  if (req.reasoning_effort().size() > kMaxEffortBytes) {
    return bad("reasoning_effort", req.reasoning_effort(), kMaxEffortBytes);
  }
  return absl::OkStatus();
}

}  // namespace gantry::router
