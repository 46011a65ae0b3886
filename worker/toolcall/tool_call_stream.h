// One generation's output as gantry.v1 stream events: the declared protocol's parser
// (call_parser.h) plus validation of every call against the advertised tools and the
// request's tool_choice, parallel_tool_calls and max_tool_calls (architecture contract 4,
// docs/tool-protocols.md, "Validation").
//
// Events carry only their payload (TextDelta, ReasoningDelta, ToolCallEvent); the caller
// stamps request_id and seq and sends the one Terminal. A ToolCallEvent is complete and
// validated: an advertised name, arguments that validate against its schema (compact JSON
// text), a server-issued id (NewId("call")), and its index among this response's calls.
// On the first failure the stream returns a terminal error status, keeps returning it,
// and emits nothing more:
//   invalid_tool_call    malformed call text, an unknown tool, arguments that violate the
//                        schema, a call under tool_choice none, a call to another function
//                        than the named one, or no call under required / named;
//   too_many_tool_calls  more calls than parallel_tool_calls=false (1) or max_tool_calls.
// Calls are never dropped or truncated silently.
//
// Thread-safety: not thread-safe; one stream per generation.
#ifndef GANTRY_WORKER_TOOLCALL_TOOL_CALL_STREAM_H_
#define GANTRY_WORKER_TOOLCALL_TOOL_CALL_STREAM_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gantry/v1/inference.pb.h"
#include "worker/toolcall/call_parser.h"
#include "worker/toolcall/tool_protocol.h"
#include "worker/toolcall/tool_set.h"

namespace gantry::toolcall {

struct ToolCallPolicy {
  v1::ToolChoiceMode tool_choice = v1::TOOL_CHOICE_AUTO;
  std::string tool_choice_name;  // with TOOL_CHOICE_NAMED
  bool parallel_tool_calls = true;
  uint32_t max_tool_calls = 0;  // 0: no limit beyond parallel_tool_calls

  static ToolCallPolicy FromRequest(const v1::InferenceRequest& request);
  // Calls allowed at most; 0 means unlimited.
  uint32_t CallLimit() const;
};

class ToolCallStream {
 public:
  // For a request to a bundle that declares `protocol`. `options.parse_calls` is set here:
  // calls are parsed whenever `protocol` is not kNone, also when the request advertises
  // no tools (then any call fails validation: invalid_tool_call). Errors (before any
  // generation): FAILED_PRECONDITION "tool_protocol_undeclared" for tools sent to a bundle
  // with ToolProtocol::kNone; INVALID_ARGUMENT "invalid_request" for tools that do not
  // compile (ToolSet::Compile), tool_choice required / named without tools, or a named
  // tool_choice that is not advertised.
  static absl::StatusOr<std::unique_ptr<ToolCallStream>> Create(ToolProtocol protocol,
                                                                const v1::InferenceRequest& request,
                                                                ParserOptions options);

  // Lower level: `tools` must not be null. `new_id` issues call ids (default
  // NewId("call")); tests may pass a deterministic one.
  ToolCallStream(ToolProtocol protocol, const ParserOptions& options,
                 std::shared_ptr<const ToolSet> tools, ToolCallPolicy policy,
                 std::function<std::string()> new_id = nullptr);

  // Appends the events `delta` decides. Errors: see above (terminal).
  absl::Status Feed(absl::string_view delta, std::vector<v1::StreamEvent>* out);
  // Generation ended. Errors: an unterminated call, no call under required / named.
  absl::Status Finish(std::vector<v1::StreamEvent>* out);

  // Valid calls emitted so far.
  uint32_t calls() const { return calls_; }

 private:
  absl::Status Consume(absl::Status parsed, std::vector<ParsedEvent>* events,
                       std::vector<v1::StreamEvent>* out);
  absl::Status AcceptCall(RawToolCall call, std::vector<v1::StreamEvent>* out);

  std::shared_ptr<const ToolSet> tools_;
  ToolCallPolicy policy_;
  std::function<std::string()> new_id_;
  ToolCallParser parser_;
  uint32_t calls_ = 0;
  absl::Status failure_;
};

}  // namespace gantry::toolcall

#endif  // GANTRY_WORKER_TOOLCALL_TOOL_CALL_STREAM_H_
