// Bounds on the names a request carries, checked (Gateway::Admit) before anything reads
// them: they are recorded with every decision, refusals included, and named in error
// messages, so a client must not choose their size (a red team's 1 MiB model names grew
// the ledger by 44 MB/s).
//
//   model                      1 to 256 bytes
//   each tool name, and tool_choice's     1 to 64 bytes (OpenAI's limit); at most 256 tools
//   chat_template_kwargs keys  1 to 64 bytes; at most 32
//   reasoning_effort           at most 16 bytes
//   tool_call_id of a tool message, and the ids of earlier tool calls
//                              1 to 256 bytes of visible ASCII (Gantry's are 29); the
//                              names of earlier tool calls as tool names
//
// Names are letters, digits and _ - . : / (what model ids such as "Qwen/Qwen3-8B:q4"
// and the real clients' tool names use).
#ifndef GANTRY_ROUTER_REQUEST_NAMES_H_
#define GANTRY_ROUTER_REQUEST_NAMES_H_

#include "absl/status/status.h"
#include "gantry/v1/inference.pb.h"

namespace gantry::router {

// OK, or invalid_request saying which name is wrong and how long it is, never echoing it.
absl::Status CheckRequestNames(const v1::InferenceRequest& request);

}  // namespace gantry::router

#endif  // GANTRY_ROUTER_REQUEST_NAMES_H_
