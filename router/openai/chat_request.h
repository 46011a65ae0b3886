// OpenAI Chat Completions request bodies -> gantry.v1.InferenceRequest.
//
// What real clients send (see tests/data/clients/ and docs/router.md) is accepted:
// content as a string, null, or an array of {type: "text", text} parts (joined with
// "\n", as vLLM does); `content: null` or "" on assistant tool-call messages; role
// "developer" (mapped to "system"); tools with any JSON Schema object as parameters
// (kept verbatim as compact JSON text, integers exact, also beyond 2^53) or with no
// parameters at all; tool_choice none/auto/required/{"type":"function",...};
// parallel_tool_calls; max_completion_tokens (preferred) or max_tokens; stop as a
// string or an array; stream and stream_options.include_usage; temperature, top_p,
// seed, presence_penalty, frequency_penalty, logit_bias and the extensions top_k,
// min_p, repetition_penalty; reasoning_effort; chat_template_kwargs (vLLM's
// extension); prompt_cache_key. Every other top-level field, and every value of a
// listed field that Gantry does not implement (n > 1, store true, a response_format
// other than text, logprobs, audio, ...), is refused: ChatCompletionFields() is the
// table, and nothing is accepted and ignored.
//
// Errors: INVALID_ARGUMENT reason invalid_json (not JSON, or not an object),
// unsupported_parameter (a field or value not implemented) and invalid_request, with
// the JSON path of the offending field first in the message ("messages[2].content:
// expected ...") and as the status's param (common/status.h).
//
// Thread-safety: pure.
#ifndef GANTRY_ROUTER_OPENAI_CHAT_REQUEST_H_
#define GANTRY_ROUTER_OPENAI_CHAT_REQUEST_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gantry/v1/inference.pb.h"
#include "router/openai/request_fields.h"

namespace gantry::openai {

struct ChatCompletionRequest {
  // request_id, principal, priority, deadline and router_prompt_tokens are left unset;
  // the gateway fills them in.
  v1::InferenceRequest request;
  bool stream = false;
  bool include_usage = false;
  // Whether the client gave max_tokens / max_completion_tokens (request.max_tokens
  // is 0 otherwise).
  bool has_max_tokens = false;
};

absl::StatusOr<ChatCompletionRequest> ParseChatCompletionRequest(absl::string_view body);

// Every top-level field of OpenAI's chat completions request (and the extensions
// Gantry reads), implemented or refused, in one table.
const std::vector<FieldRule>& ChatCompletionFields();

}  // namespace gantry::openai

#endif  // GANTRY_ROUTER_OPENAI_CHAT_REQUEST_H_
