// JSON field readers shared by the two OpenAI request mappers (chat_request.h and
// responses_request.h): typed getters that fail with invalid_request naming the JSON
// path of the field, text content (a string or an array of text parts), function tool
// definitions, tool_choice modes, the sampling fields both APIs accept, and the replay
// check of tool results against earlier tool calls.
//
// Errors: INVALID_ARGUMENT with reason invalid_request and the field's JSON path first
// in the message ("input[2].content[0].type: ..."); CheckToolReplay also
// unknown_tool_call_id.
//
// Thread-safety: pure functions.
#ifndef GANTRY_ROUTER_OPENAI_REQUEST_FIELDS_H_
#define GANTRY_ROUTER_OPENAI_REQUEST_FIELDS_H_

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/json.h"
#include "gantry/v1/inference.pb.h"

namespace gantry::openai {

// The body as a JSON object. Errors: invalid_json (not JSON, or not an object).
absl::StatusOr<json::Value> ParseBodyObject(absl::string_view body,
                                            const json::ParseOptions& options = {});
// The required, non-empty string `model` of the body into out->model.
absl::Status ParseModel(const json::Value& root, v1::InferenceRequest* out);
// The optional `prompt_cache_key` (a string of at most 256 bytes) into
// out->prompt_cache_key.
absl::Status ParsePromptCacheKey(const json::Value& root, v1::InferenceRequest* out);

// A function name clients may advertise: 1-64 of a-z A-Z 0-9 _ . -
bool IsValidToolName(absl::string_view name);

// invalid_request "PATH: WHAT", naming PATH as the error's param.
absl::Status Invalid(absl::string_view path, absl::string_view what);
// unsupported_parameter "PATH: WHAT", naming PATH as the error's param: a field, or a
// value of it, that Gantry does not implement.
absl::Status Unsupported(absl::string_view path, absl::string_view what);

// A top-level field of an OpenAI request body and what Gantry does with it.
struct FieldRule {
  const char* name;
  // nullptr: implemented (the mapper reads it and refuses, with unsupported_parameter,
  // any value it does not implement); else why the field is refused.
  const char* refused;
};
// unsupported_parameter naming the first member of `root` that `rules` refuse or do
// not list (a misspelling, a field of a later API version): nothing is accepted and
// ignored. A member whose value is null asks for nothing and passes. `api` names the
// request in the message ("chat completions").
absl::Status CheckFields(const json::Value& root, const std::vector<FieldRule>& rules, absl::string_view api);
// unsupported_parameter "PATH.KEY" for the first member of `object` (an object inside
// the body: a message, a content part, a tool) whose key is not in `known` and whose
// value is not null.
absl::Status CheckMembers(const json::Value& object, absl::string_view path,
                          std::initializer_list<absl::string_view> known);

// OpenAI's output format into out->response_format: chat completions' response_format
// (`nested`: {"type": "json_schema", "json_schema": {name, schema, strict}}) or the
// Responses API's text.format ({"type": "json_schema", name, schema, strict}); "text",
// "json_object" and "json_schema". `path` names the field in errors. The schema must
// compile and be one the constraint engine enforces (CheckResponseFormat).
absl::Status ParseResponseFormat(const json::Value& format, absl::string_view path, bool nested,
                                 v1::InferenceRequest* out);
// A ResponseFormat as the worker will run it (also a gRPC client's): fields that fit
// its type, a name of 1-64 letters, digits, '_' or '-', and a schema that compiles and
// whose every assertion worker/constrain enforces (unsupported_parameter naming
// `path`.schema otherwise).
absl::Status CheckResponseFormat(const v1::ResponseFormat& format, absl::string_view path);

// The values both APIs implement of store (false), top_logprobs (0) and service_tier
// ("auto", "default"); others are unsupported_parameter. `stored` names what Gantry
// does not store ("completions", "responses").
absl::Status CheckSharedValues(const json::Value& root, absl::string_view stored);
// A value from the client as an error message quotes it: 'VALUE' when at most 64 bytes,
// else its first 64 bytes (whole characters), "...", and its size, so that no client
// chooses the size of its error (a red team's 1 MiB roles came back whole).
std::string Quoted(absl::string_view value);
// invalid_request "PATH: expected EXPECTED, got <type of got>".
absl::Status WrongType(absl::string_view path, absl::string_view expected, const json::Value& got);

// The member `key` of `object` when present and not null; nullptr otherwise.
const json::Value* Field(const json::Value& object, absl::string_view key);

absl::StatusOr<std::string> GetString(const json::Value& v, absl::string_view path);
absl::StatusOr<bool> GetBool(const json::Value& v, absl::string_view path);
// A finite number in [lo, hi].
absl::StatusOr<double> GetNumber(const json::Value& v, absl::string_view path, double lo, double hi);
// An integer in [lo, hi].
absl::StatusOr<int64_t> GetInteger(const json::Value& v, absl::string_view path, int64_t lo,
                                   int64_t hi);

// `content` as text: a string, or an array of {type, text} parts whose type is one of
// `part_types` (joined with "\n"). nullptr (absent or null) gives "" and *is_null true.
// Other part types (images, files) fail: only text is supported.
absl::Status ParseTextContent(const json::Value* content, const std::string& path,
                              std::initializer_list<absl::string_view> part_types,
                              std::string* text, bool* is_null);

// The arguments of a replayed tool call: a string holding a JSON object (kept as sent;
// clients re-serialise), an object (serialized compactly), or absent ("{}").
absl::Status ParseToolArguments(const json::Value* arguments, const std::string& path,
                                std::string* out);

// The `tools` array: function tools only, each {type: "function", function: {name,
// description, parameters, strict}} (chat completions, `nested`) or {type: "function",
// name, description, parameters, strict} (Responses). Names must be unique and 1-64 of
// a-z A-Z 0-9 _ . -; parameters, when given, a JSON Schema object (kept as compact
// JSON). Appends to out->tools.
absl::Status ParseFunctionTools(const json::Value& tools, bool nested, v1::InferenceRequest* out);

// tool_choice as "none" / "auto" / "required", or the name of one function
// (`named_function` at `name_path`, already found by the caller in its API's object
// shape; nullptr when absent). Checks that required / named come with tools and
// that the name is one of them. Precondition: out->tools is filled.
absl::Status ParseToolChoiceMode(const json::Value& choice, const json::Value* named_function,
                                 absl::string_view path, absl::string_view name_path,
                                 v1::InferenceRequest* out);

// temperature, top_p, top_k, min_p, repetition_penalty, presence_penalty,
// frequency_penalty, logit_bias (at most kMaxLogitBias token ids, each -100 to 100)
// and seed from the body's root.
absl::Status ParseSampling(const json::Value& root, v1::InferenceRequest* out);
constexpr size_t kMaxLogitBias = 1024;

// Every tool result (role "tool") must answer a call id of an EARLIER assistant tool
// call in the same request: the client replays the whole conversation, so an id that
// matches none is a client bug or a forged result, never something to render.
// `path_of(i)` names message i's id field for the error message.
// Errors: unknown_tool_call_id (400).
absl::Status CheckToolReplay(const v1::InferenceRequest& request,
                             const std::function<std::string(int)>& path_of);

}  // namespace gantry::openai

#endif  // GANTRY_ROUTER_OPENAI_REQUEST_FIELDS_H_
