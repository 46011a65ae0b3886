// OpenAI Responses API request bodies (POST /v1/responses) -> gantry.v1.InferenceRequest,
// the same internal request chat completions produce, so both APIs share one
// enforcement and dispatch path (router/gateway.h).
//
// Mapping (docs/router.md, "Responses API"):
//   instructions                 a first "system" message
//   input: "text"                one user message
//   input: [items]               in order:
//     {type: "message"} or {role, content} (EasyInputMessage)
//                                role user / system / developer (-> system) / assistant;
//                                content a string or input_text / output_text parts
//     {type: "reasoning"}        reasoning_content of the assistant turn it opens
//                                (content reasoning_text, else the text in our own
//                                encrypted_content, else summary summary_text)
//     {type: "function_call"}    a tool call {call_id, name, arguments} of the assistant
//                                turn: consecutive assistant text, reasoning and calls
//                                form ONE assistant message, exactly like chat
//                                completions' {role: assistant, content, tool_calls}
//     {type: "function_call_output"} a "tool" message answering call_id
//   tools: [{type: "function", name, description, parameters, strict}] (flat shape)
//   tool_choice: none / auto / required / {type: "function", name}
//   parallel_tool_calls, max_tool_calls, max_output_tokens, reasoning.effort,
//   temperature, top_p (and top_k, min_p, repetition_penalty, presence_penalty,
//   frequency_penalty, logit_bias, seed), stream, metadata (echoed), prompt_cache_key
//   (the broker's affinity key), store false, text.format text, include
//   ["reasoning.encrypted_content"] (always there) or [],
//   truncation "disabled", top_logprobs 0, service_tier auto / default.
// Stateless: previous_response_id, conversation, item_reference, background and store
// true are refused (Gantry stores no responses: send the whole conversation). Every
// other top-level field, and every value of a listed one that Gantry does not
// implement, is refused with unsupported_parameter: ResponsesFields() is the table.
//
// Errors: INVALID_ARGUMENT invalid_json (not JSON / not an object),
// unsupported_parameter and invalid_request with the JSON path first ("input[3].call_id:
// ...") and as the status's param, unknown_tool_call_id (a function_call_output whose
// call_id no earlier function_call in `input` has).
//
// Thread-safety: pure.
#ifndef GANTRY_ROUTER_OPENAI_RESPONSES_REQUEST_H_
#define GANTRY_ROUTER_OPENAI_RESPONSES_REQUEST_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/json.h"
#include "router/openai/chat_request.h"

namespace gantry::openai {

struct ResponsesRequest {
  // The internal request, stream flag and whether max_output_tokens was given
  // (include_usage is always true: response.completed carries usage).
  ChatCompletionRequest chat;
  // Request fields the response object echoes: instructions, tools, tool_choice,
  // parallel_tool_calls, max_output_tokens, max_tool_calls, temperature, top_p,
  // reasoning, metadata (each present only when the client sent it).
  json::Value echo = json::Value::EmptyObject();
};

absl::StatusOr<ResponsesRequest> ParseResponsesRequest(absl::string_view body);

// Every top-level field of OpenAI's Responses request (and the extensions Gantry
// reads), implemented or refused, in one table.
const std::vector<FieldRule>& ResponsesFields();

}  // namespace gantry::openai

#endif  // GANTRY_ROUTER_OPENAI_RESPONSES_REQUEST_H_
