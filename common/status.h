// The one error vocabulary of Gantry.
//
// Every fallible function returns absl::Status or absl::StatusOr<T> with a canonical
// code. A Gantry error additionally carries a stable snake_case *reason*
// ("context_length_exceeded") as a status payload, so that a failure crossing a socket
// or landing in the ledger keeps both its canonical code (by name) and its reason.
// The reason -> HTTP mapping lives in one table: common/error_codes.h.
//
// Thread-safety: all functions are pure.
#ifndef GANTRY_COMMON_STATUS_H_
#define GANTRY_COMMON_STATUS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gantry {
namespace v1 {
class Status;
}  // namespace v1

// Returns a non-OK status with `code`, `reason` attached, and `message`.
// Precondition: code != kOk.
absl::Status Error(absl::StatusCode code, absl::string_view reason,
                   absl::string_view message);

// The reason attached by Error(), or "" when none was attached.
std::string ReasonOf(const absl::Status& status);

// Returns `status` with a retry hint attached (for RESOURCE_EXHAUSTED / UNAVAILABLE):
// the gateway sends it as Retry-After, the wire as Status.retry_after_ms.
absl::Status WithRetryAfter(absl::Status status, uint32_t retry_after_ms);

// The hint attached by WithRetryAfter(), or 0.
uint32_t RetryAfterMs(const absl::Status& status);

// Returns `status` naming the request field it is about (a JSON path such as
// "messages[2].content" or "logprobs"): the gateway sends it as the OpenAI error's
// `param`.
absl::Status WithParam(absl::Status status, absl::string_view param);
// The field attached by WithParam(), or "".
std::string ParamOf(const absl::Status& status);

// Canonical name of a code: "INVALID_ARGUMENT". Never empty.
std::string CodeName(absl::StatusCode code);

// Inverse of CodeName. Unknown names map to kUnknown (a peer from the future may send
// codes we do not know; that is not a reason to fail).
absl::StatusCode CodeFromName(absl::string_view name);

// Wire form. ToProto(OkStatus()) has code "OK".
void ToProto(const absl::Status& status, v1::Status* out);
absl::Status FromProto(const v1::Status& status);

}  // namespace gantry

// Evaluates `expr` (an absl::Status); returns it from the current function if not OK.
#define GANTRY_RETURN_IF_ERROR(expr)             \
  do {                                           \
    ::absl::Status gantry_status_ = (expr);      \
    if (!gantry_status_.ok()) return gantry_status_; \
  } while (0)

#define GANTRY_CONCAT_INNER_(a, b) a##b
#define GANTRY_CONCAT_(a, b) GANTRY_CONCAT_INNER_(a, b)

// `GANTRY_ASSIGN_OR_RETURN(auto x, MaybeX());` unwraps a StatusOr or returns its error.
#define GANTRY_ASSIGN_OR_RETURN(lhs, expr) \
  GANTRY_ASSIGN_OR_RETURN_IMPL_(GANTRY_CONCAT_(gantry_statusor_, __LINE__), lhs, expr)
#define GANTRY_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()

#endif  // GANTRY_COMMON_STATUS_H_
