// OpenAI-style JSON error responses, the one shape every gateway error takes:
//
//   {"error": {"message": "...", "type": "invalid_request_error", "param": null,
//              "code": "context_length_exceeded"}}
//
// `param` is the request field the error is about (common/status.h WithParam) or null;
// `code` is the stable Gantry reason (common/error_codes.cc), the HTTP status comes
// from HttpStatusFor() (the one table), and 429/503 responses carry Retry-After
// (seconds, rounded up from the status's retry hint; 1 when none was attached).
//
// Thread-safety: pure functions.
#ifndef GANTRY_ROUTER_HTTP_ERROR_RESPONSE_H_
#define GANTRY_ROUTER_HTTP_ERROR_RESPONSE_H_

#include <string>

#include "absl/status/status.h"
#include "router/http/http_server.h"

namespace gantry::http {

// The reason of `status`, or the reason its code falls back to ("internal" for an
// unreasoned INTERNAL, "invalid_request" for INVALID_ARGUMENT, ...).
std::string ErrorCodeOf(const absl::Status& status);

// The JSON text of the error object `{"error": {...}}`.
std::string ErrorJson(const absl::Status& status);

// A complete response: status from the table, JSON body, Retry-After when due.
// Precondition: !status.ok().
HttpResponse ErrorResponse(const absl::Status& status);

// Seconds for Retry-After (>= 1) when the HTTP status is 429 or 503, else 0.
int RetryAfterSeconds(const absl::Status& status);

}  // namespace gantry::http

#endif  // GANTRY_ROUTER_HTTP_ERROR_RESPONSE_H_
