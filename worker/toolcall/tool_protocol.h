// The tool-call protocols a bundle may declare (BundleIdentity.tool_protocol), and their
// stable names. A protocol is declared by the bundle, never inferred from a model name
// (docs/tool-protocols.md).
//
// Thread-safety: pure functions.
#ifndef GANTRY_WORKER_TOOLCALL_TOOL_PROTOCOL_H_
#define GANTRY_WORKER_TOOLCALL_TOOL_PROTOCOL_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gantry::toolcall {

enum class ToolProtocol {
  kNone,              // "": the bundle declares none; tools cannot be served
  kHermesJson,        // "hermes_json": <tool_call>{"name": ..., "arguments": {...}}</tool_call>
  kQwen3CoderXml,     // "qwen3_coder_xml": <tool_call><function=N><parameter=K>v</parameter>...
  kLlama31Json,       // "llama31_json": {"name": ..., "parameters": {...}} as the message
  kMistralToolCalls,  // "mistral_tool_calls": [TOOL_CALLS][{"name": ..., "arguments": {...}}]
};

// The declared name: "", "hermes_json", "qwen3_coder_xml", "llama31_json",
// "mistral_tool_calls".
absl::string_view ToolProtocolName(ToolProtocol protocol);

// Inverse of ToolProtocolName. Errors: INVALID_ARGUMENT, reason "invalid_request", for any
// other name (a bundle manifest with an unknown protocol must not load).
absl::StatusOr<ToolProtocol> ParseToolProtocol(absl::string_view name);

}  // namespace gantry::toolcall

#endif  // GANTRY_WORKER_TOOLCALL_TOOL_PROTOCOL_H_
