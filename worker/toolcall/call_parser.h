// The streaming tool-call parser: fed the model's text as it is generated, it splits it
// into plain text, reasoning and complete tool calls, by the bundle's declared protocol
// only (docs/tool-protocols.md, "Streaming").
//
// - Text that cannot be part of a call is emitted at once; text that might begin a
//   marker ("<tool_c") or end in the middle of a UTF-8 sequence is held until the next
//   delta decides it.
// - A call is emitted only when its closing syntax has arrived, and never in part.
// - With `reasoning`, <think>...</think> becomes reasoning (tags removed), wherever it
//   appears in plain text; markers inside reasoning are not calls.
// - Feeding a text in any split gives the same events once adjacent deltas of one kind
//   are joined.
// Emitted text is valid UTF-8 (invalid bytes become U+FFFD).
//
// Calls are not validated here (tool_call_stream.h does that).
//
// Thread-safety: not thread-safe; one parser per generation.
#ifndef GANTRY_WORKER_TOOLCALL_CALL_PARSER_H_
#define GANTRY_WORKER_TOOLCALL_CALL_PARSER_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "worker/toolcall/call_syntax.h"
#include "worker/toolcall/tool_protocol.h"

namespace gantry::toolcall {

struct ParserOptions {
  // The bundle's template uses <think>...</think> for reasoning.
  bool reasoning = false;
  // The rendered prompt already opened <think> (e.g. Qwen3 thinking templates), so the
  // output begins inside reasoning. Implies nothing unless `reasoning`.
  bool starts_in_reasoning = false;
  // Look for tool calls at all. False for a bundle without a tool protocol: then the
  // text passes through (only reasoning is split), even if it looks like a call.
  bool parse_calls = true;
  // One call body may hold at most this many bytes; past it the call is malformed.
  size_t max_call_bytes = size_t{4} << 20;
};

struct ParsedEvent {
  enum class Kind { kText, kReasoning, kCall };
  Kind kind = Kind::kText;
  std::string text;  // kText, kReasoning: non-empty, valid UTF-8
  RawToolCall call;  // kCall
};

class ToolCallParser {
 public:
  // `parameter_types` types qwen3_coder_xml's raw-text values (may be empty: all strings).
  // ToolProtocol::kNone parses no calls.
  ToolCallParser(ToolProtocol protocol, const ParserOptions& options,
                 ParameterTypesFn parameter_types = nullptr);
  ToolCallParser(const ToolCallParser&) = delete;
  ToolCallParser& operator=(const ToolCallParser&) = delete;

  // Appends to `out` what `delta` decides. Errors: INVALID_ARGUMENT "invalid_tool_call"
  // for malformed call text; the parser is then finished and returns that error again.
  absl::Status Feed(absl::string_view delta, std::vector<ParsedEvent>* out);
  // Generation ended: flushes held text, or fails on an unterminated call.
  absl::Status Finish(std::vector<ParsedEvent>* out);

 private:
  enum class Mode { kStart, kText, kReasoning, kCall, kFinished };

  absl::Status Process(bool at_end, std::vector<ParsedEvent>* out);
  // One step; returns false when it needs more input.
  bool StepPlain(bool at_end, std::vector<ParsedEvent>* out);
  bool StepStart(bool at_end);
  absl::StatusOr<bool> StepCall(bool at_end, std::vector<ParsedEvent>* out);
  void Emit(ParsedEvent::Kind kind, absl::string_view bytes, std::vector<ParsedEvent>* out);
  void EnterCall();

  ParserOptions options_;
  std::string protocol_name_;
  std::unique_ptr<CallSyntax> syntax_;  // null: no calls
  std::vector<std::string> call_markers_;
  Mode mode_ = Mode::kText;
  // Whether the message has content yet (text or a call); StartsMessageOnly syntaxes
  // only look for a call before it has.
  bool content_started_ = false;
  std::string buffer_;  // undecided bytes; in kCall, the call body so far
  absl::Status failure_;
};

}  // namespace gantry::toolcall

#endif  // GANTRY_WORKER_TOOLCALL_CALL_PARSER_H_
