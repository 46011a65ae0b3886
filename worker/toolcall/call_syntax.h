// The body syntaxes of the declared tool-call protocols, behind one incremental interface
// that the streaming parser (call_parser.h) drives, plus the scanning helpers they share.
// Each syntax is specified in docs/tool-protocols.md.
//
// Model output is outside input: a syntax never asserts on it; malformed text is an
// INVALID_ARGUMENT status with reason "invalid_tool_call".
//
// Thread-safety: a CallSyntax is stateful; one per stream, used from one thread.
#ifndef GANTRY_WORKER_TOOLCALL_CALL_SYNTAX_H_
#define GANTRY_WORKER_TOOLCALL_CALL_SYNTAX_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/json.h"
#include "common/status.h"

namespace gantry::toolcall {

// A call as the model wrote it: not yet checked against the advertised tools.
struct RawToolCall {
  std::string name;
  json::Value arguments;  // always an object
};

// The JSON Schema types (json_schema::TypeBits) declared for parameter `key` of tool
// `tool`; 0 when unknown. qwen3_coder_xml uses it to type raw-text parameter values.
using ParameterTypesFn = std::function<uint8_t(absl::string_view tool, absl::string_view key)>;

struct ScanResult {
  // Calls completed by this scan, in order (never partial).
  std::vector<RawToolCall> calls;
  // The syntax closed: the first `consumed` bytes of the body belong to it, and the parser
  // returns to plain text after them.
  bool done = false;
  size_t consumed = 0;
};

class CallSyntax {
 public:
  virtual ~CallSyntax() = default;

  // Text that opens a call body wherever it appears in plain text ("<tool_call>"). Empty
  // for syntaxes that only start a message (StartsMessageOnly).
  virtual std::vector<std::string> OpenMarkers() const = 0;
  // Whether a call can only begin the assistant message (llama31_json).
  virtual bool StartsMessageOnly() const { return false; }

  // Begins a new body.
  virtual void Reset() = 0;
  // Scans `body`: the bytes after the open marker so far. Every call after Reset() sees the
  // previous body with more bytes appended, so a syntax may resume where it stopped.
  // `at_end`: generation ended; an unclosed body is then malformed.
  // Errors: INVALID_ARGUMENT "invalid_tool_call" naming what is malformed.
  virtual absl::StatusOr<ScanResult> Scan(absl::string_view body, bool at_end) = 0;
};

std::unique_ptr<CallSyntax> NewHermesJsonSyntax();
std::unique_ptr<CallSyntax> NewQwen3CoderXmlSyntax(ParameterTypesFn parameter_types);
std::unique_ptr<CallSyntax> NewLlama31JsonSyntax();
std::unique_ptr<CallSyntax> NewMistralToolCallsSyntax();

// ---------------------------------------------------------------------------------------
// Shared helpers.

// INVALID_ARGUMENT "invalid_tool_call": "<protocol>: <what>".
absl::Status Malformed(absl::string_view protocol, absl::string_view what);

// A short, printable excerpt of model text for error messages (JSON-quoted).
std::string Excerpt(absl::string_view text, size_t limit = 40);

enum class LiteralMatch { kYes, kNo, kPartial };
// Whether `text` at `pos` starts with `literal` (kPartial: text ends within a prefix of it).
LiteralMatch MatchLiteral(absl::string_view text, size_t pos, absl::string_view literal);

bool IsJsonSpace(char c);
size_t SkipJsonSpace(absl::string_view text, size_t pos);

// Finds, incrementally, where one JSON object or array that starts at a given offset ends,
// by bracket depth outside strings (it does not validate; json::Parse does that).
class JsonExtent {
 public:
  void Reset(size_t start);
  size_t start() const { return start_; }
  // Scans from where it stopped; returns one past the closing bracket, or npos when the
  // text ends first.
  size_t Advance(absl::string_view text);

 private:
  size_t start_ = 0;
  size_t pos_ = 0;
  int64_t depth_ = 0;
  bool in_string_ = false;
  bool escape_ = false;
};

// Reads a call object {"name": string, <arguments key>: object, ...}. `argument_keys`: the
// accepted names of the arguments member (at most one may be present; absent means {}).
// `ignored_keys`: members that may appear and are dropped (e.g. a model-written "id"). Any
// other member is malformed.
absl::StatusOr<RawToolCall> CallFromObject(absl::string_view protocol, const json::Value& object,
                                           std::initializer_list<absl::string_view> argument_keys,
                                           std::initializer_list<absl::string_view> ignored_keys);

// json::Parse with its error rephrased as malformed call text.
absl::StatusOr<json::Value> ParseCallJson(absl::string_view protocol, absl::string_view what,
                                          absl::string_view text);

}  // namespace gantry::toolcall

#endif  // GANTRY_WORKER_TOOLCALL_CALL_SYNTAX_H_
