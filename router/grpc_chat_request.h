// The request of a gRPC Gateway Chat call (gantry.v1.ChatRequest, docs/protocol.md
// section 7), checked and normalised before the pipeline sees it. protobuf has already
// decoded the bytes, but every value in them comes from outside: this is the gRPC
// twin of openai/chat_request.h, with the same rules where the two overlap.
//
//   request            required
//   model              non-empty
//   messages           at least one; role system, user, assistant, tool (developer ->
//                      system); text valid UTF-8; tool_calls only on assistant messages,
//                      each with an id, a valid name and arguments that are a JSON object
//                      text ("" -> "{}"); tool messages need tool_call_id, answering an
//                      EARLIER assistant call (unknown_tool_call_id otherwise)
//   tools              unique valid names; parameters_json "" or a JSON object (kept as
//                      compact JSON)
//   tool_choice        a value this gantry.v1 does not know is refused; REQUIRED and
//                      NAMED need tools; NAMED names one of them; a tool_choice_name
//                      needs NAMED
//   sampling           temperature [0, 2], top_p [0, 1], top_k <= 2^20, min_p [0, 1],
//                      repetition_penalty [0.01, 10], presence_penalty and
//                      frequency_penalty [-2, 2], logit_bias at most 1,024 ids, each
//                      [-100, 100]; NaN is out of range
//   reasoning_effort   "", low, medium, high
//   template_kwargs    each value JSON text
//   request_id, principal, priority, deadline_unix_ms, router_prompt_tokens,
//   special_tokens_in_content
//                      must be unset (unsupported_parameter): the router sets them
//                      (the id, the key, the policy, the call's gRPC deadline)
//   max_tokens         0 means "not set" (the model's default output cap applies)
//   prompt_cache_key   at most 256 bytes (the broker's affinity key)
//   unknown fields     a field protobuf kept as unknown, at any depth (a later
//                      gantry.v1's), is refused with unsupported_parameter: never
//                      dropped unread
//
// Errors: INVALID_ARGUMENT invalid_request naming the field ("request.messages[2].role:
// ..."), unsupported_parameter, unknown_tool_call_id.
//
// Thread-safety: a pure function.
#ifndef GANTRY_ROUTER_GRPC_CHAT_REQUEST_H_
#define GANTRY_ROUTER_GRPC_CHAT_REQUEST_H_

#include "absl/status/statusor.h"
#include "gantry/v1/gateway.pb.h"
#include "gantry/v1/inference.pb.h"

namespace gantry::router {

struct GrpcChat {
  v1::InferenceRequest request;
  bool has_max_tokens = false;
  bool include_usage = false;
};

absl::StatusOr<GrpcChat> CheckGrpcChatRequest(const v1::ChatRequest& chat);

}  // namespace gantry::router

#endif  // GANTRY_ROUTER_GRPC_CHAT_REQUEST_H_
