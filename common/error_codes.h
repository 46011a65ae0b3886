// Gantry's stable error reasons and their one mapping to HTTP.
//
// A reason is a snake_case string that clients, logs and the ledger may depend on; it
// never changes meaning once released. Each has exactly one canonical code and one HTTP
// status. Rule of thumb (clients retry 5xx and 429 for minutes): a request that can
// never succeed as sent gets a 4xx.
//
// Thread-safety: the table is immutable.
#ifndef GANTRY_COMMON_ERROR_CODES_H_
#define GANTRY_COMMON_ERROR_CODES_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gantry {

struct ErrorReason {
  const char* reason;
  absl::StatusCode code;
  int http_status;
  // Whether a client may retry the same request later (429/503 carry Retry-After).
  bool retryable;
  const char* meaning;
};

// The whole table, in documentation order (docs/protocol.md, "Error reasons").
const ErrorReason* ErrorReasons(size_t* count);

// The entry for `reason`, or nullptr when the reason is not in the table.
const ErrorReason* FindErrorReason(absl::string_view reason);

// The HTTP status for a failure: from its reason when it has a known one, otherwise
// from its canonical code (INVALID_ARGUMENT 400, UNAUTHENTICATED 401,
// PERMISSION_DENIED 403, NOT_FOUND 404, RESOURCE_EXHAUSTED 429, UNIMPLEMENTED 501,
// UNAVAILABLE 503, DEADLINE_EXCEEDED 504, ..., INTERNAL and UNKNOWN 500).
// OK maps to 200.
int HttpStatusFor(const absl::Status& status);

// Shorthand for Error(table code of reason, reason, message).
// Precondition: `reason` is in the table (a programming error otherwise; it then maps
// to INTERNAL so that nothing from outside can reach an abort).
absl::Status ReasonError(absl::string_view reason, absl::string_view message);

}  // namespace gantry

#endif  // GANTRY_COMMON_ERROR_CODES_H_
