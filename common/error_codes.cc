#include "common/error_codes.h"

#include "common/status.h"

namespace gantry {
namespace {

using C = absl::StatusCode;

// Keep in the order of docs/protocol.md, "Error reasons". Adding a row is compatible;
// changing one is not.
constexpr ErrorReason kReasons[] = {
    // Requests that can never succeed as sent: 4xx, not retried.
    {"invalid_json", C::kInvalidArgument, 400, false, "the body is not valid JSON"},
    {"invalid_request", C::kInvalidArgument, 400, false,
     "a field is missing, of the wrong type, or out of its domain"},
    {"unsupported_parameter", C::kInvalidArgument, 400, false,
     "a request field, or a value of it, that Gantry does not implement: refused, never ignored"},
    {"body_too_large", C::kInvalidArgument, 413, false, "the body exceeds the size limit"},
    {"unauthenticated", C::kUnauthenticated, 401, false, "no key, or an unknown key"},
    {"policy_denied", C::kPermissionDenied, 403, false,
     "the policy does not allow this model, parameter, or tool"},
    {"model_not_found", C::kNotFound, 404, false, "no such model"},
    {"context_length_exceeded", C::kInvalidArgument, 400, false,
     "prompt tokens plus reserved output exceed the bundle's context"},
    {"template_render_failed", C::kInvalidArgument, 422, false,
     "the bundle's chat template rejected these messages"},
    {"tool_protocol_undeclared", C::kFailedPrecondition, 400, false,
     "tools were sent to a bundle that declares no tool protocol"},
    {"invalid_tool_call", C::kInvalidArgument, 422, false,
     "the model produced a tool call that failed validation"},
    {"tool_call_denied", C::kPermissionDenied, 403, false,
     "the model called a tool, or gave arguments, that the policy denies the principal"},
    {"too_many_tool_calls", C::kInvalidArgument, 422, false,
     "more tool calls than parallel_tool_calls / max_tool_calls allow"},
    {"unknown_tool_call_id", C::kInvalidArgument, 400, false,
     "a tool result answers a call id that no earlier assistant tool call in the request has"},
    // The sandbox service refuses a caller or a workspace (docs/sandbox.md, "Service").
    {"sandbox_peer_unknown", C::kPermissionDenied, 403, false,
     "the sandbox service maps the caller's uid or CURVE key to no principal"},
    {"sandbox_principal_mismatch", C::kPermissionDenied, 403, false,
     "a ToolCall names a principal other than the one its caller authenticated as"},
    {"sandbox_workspace_outside_roots", C::kPermissionDenied, 403, false,
     "the workspace is not beneath a workspace root of the sandbox service"},
    {"sandbox_workspace_unsafe", C::kPermissionDenied, 403, false,
     "a user other than root can change the workspace's path, or the call would run as root"},
    {"budget_exhausted", C::kResourceExhausted, 429, true,
     "the principal's token budget for the period is spent (Retry-After: until it resets)"},
    // Transient: retry after Retry-After.
    {"rate_limited", C::kResourceExhausted, 429, true, "requests per minute exceeded"},
    {"queue_full", C::kResourceExhausted, 429, true, "the model's admission queue is full"},
    {"no_worker", C::kUnavailable, 503, true, "no live worker serves this model now"},
    {"worker_lost", C::kUnavailable, 503, true, "the worker died or stopped answering"},
    {"deadline_exceeded", C::kDeadlineExceeded, 504, true, "the request's deadline passed"},
    {"cancelled", C::kCancelled, 499, false, "the client cancelled the request"},
    // Gantry's own faults.
    {"protocol_error", C::kInvalidArgument, 502, false,
     "a peer sent a malformed or out-of-order frame"},
    {"bundle_mismatch", C::kFailedPrecondition, 500, false,
     "a bundle asset does not match its pinned SHA-256"},
    {"invalid_gguf", C::kInvalidArgument, 500, false, "a GGUF model file is malformed or truncated"},
    {"invalid_output", C::kInternal, 500, false,
     "the output left the constraint the request asked for (response_format, a tool call's grammar)"},
    {"invalid_key_file", C::kInvalidArgument, 500, false,
     "a CURVE key file or worker allow-list is malformed or readable by others"},
    {"invalid_tls_config", C::kInvalidArgument, 500, false,
     "the TLS certificate or private key cannot be loaded, or they do not match"},
    // Worker registration (docs/protocol.md, "Worker identity"): the broker refuses a
    // READY; the code reaches only the worker (DISCONNECT) and the logs.
    {"worker_not_allowed", C::kPermissionDenied, 403, false,
     "the worker allow-list does not let this key serve the model or bundle its READY named"},
    {"worker_id_taken", C::kAlreadyExists, 409, false,
     "a LIVE worker already holds the worker_id this READY named"},
    // HTTP framing and routing (router/http). Justification: RFC 9112/9110 name these
    // statuses, and every error body needs a stable code; none of the rows above fits
    // (a request for an unknown path is not an unknown model).
    {"route_not_found", C::kNotFound, 404, false, "no such HTTP path"},
    {"method_not_allowed", C::kInvalidArgument, 405, false,
     "the HTTP method is not allowed on this path"},
    {"headers_too_large", C::kInvalidArgument, 431, false,
     "the request line or header section exceeds the size limit"},
    {"server_busy", C::kUnavailable, 503, true,
     "the gateway is at its connection limit"},
    {"request_timeout", C::kDeadlineExceeded, 408, false,
     "the request's head or body did not arrive in time, or its body came too slowly"},
    {"evidence_unavailable", C::kUnavailable, 503, true,
     "the ledger cannot make this request's evidence durable (spool failed or too slow)"},
    {"internal", C::kInternal, 500, false, "a bug in Gantry"},
};

int HttpStatusForCode(absl::StatusCode code) {
  switch (code) {
    case C::kOk: return 200;
    case C::kInvalidArgument: return 400;
    case C::kFailedPrecondition: return 400;
    case C::kOutOfRange: return 400;
    case C::kUnauthenticated: return 401;
    case C::kPermissionDenied: return 403;
    case C::kNotFound: return 404;
    case C::kAlreadyExists: return 409;
    case C::kAborted: return 409;
    case C::kResourceExhausted: return 429;
    case C::kCancelled: return 499;
    case C::kUnimplemented: return 501;
    case C::kUnavailable: return 503;
    case C::kDeadlineExceeded: return 504;
    default: return 500;
  }
}

}  // namespace

const ErrorReason* ErrorReasons(size_t* count) {
  *count = sizeof(kReasons) / sizeof(kReasons[0]);
  return kReasons;
}

const ErrorReason* FindErrorReason(absl::string_view reason) {
  for (const auto& entry : kReasons) {
    if (reason == entry.reason) return &entry;
  }
  return nullptr;
}

int HttpStatusFor(const absl::Status& status) {
  if (const ErrorReason* entry = FindErrorReason(ReasonOf(status))) {
    return entry->http_status;
  }
  return HttpStatusForCode(status.code());
}

absl::Status ReasonError(absl::string_view reason, absl::string_view message) {
  if (const ErrorReason* entry = FindErrorReason(reason)) {
    return Error(entry->code, reason, message);
  }
  return Error(C::kInternal, "internal",
               std::string("unregistered error reason '") + std::string(reason) +
                   "': " + std::string(message));
}

}  // namespace gantry
