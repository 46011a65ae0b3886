#include "worker/toolcall/tool_protocol.h"

#include "absl/strings/str_cat.h"
#include "common/error_codes.h"

namespace gantry::toolcall {

namespace {
constexpr ToolProtocol kAll[] = {ToolProtocol::kNone, ToolProtocol::kHermesJson,
                                 ToolProtocol::kQwen3CoderXml, ToolProtocol::kLlama31Json,
                                 ToolProtocol::kMistralToolCalls};
}  // namespace

absl::string_view ToolProtocolName(ToolProtocol protocol) {
  switch (protocol) {
    case ToolProtocol::kNone: return "";
    case ToolProtocol::kHermesJson: return "hermes_json";
    case ToolProtocol::kQwen3CoderXml: return "qwen3_coder_xml";
    case ToolProtocol::kLlama31Json: return "llama31_json";
    case ToolProtocol::kMistralToolCalls: return "mistral_tool_calls";
  }
  return "";
}

absl::StatusOr<ToolProtocol> ParseToolProtocol(absl::string_view name) {
  for (ToolProtocol protocol : kAll) {
    if (ToolProtocolName(protocol) == name) return protocol;
  }
  return ReasonError("invalid_request",
                     absl::StrCat("unknown tool protocol \"", name,
                                  "\" (hermes_json, qwen3_coder_xml, llama31_json, "
                                  "mistral_tool_calls, or \"\")"));
}

}  // namespace gantry::toolcall
