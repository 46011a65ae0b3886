#include "router/http/error_response.h"

#include "absl/strings/str_cat.h"
#include "common/error_codes.h"
#include "common/json.h"
#include "common/status.h"

namespace gantry::http {
namespace {

const char* ErrorType(int http_status) {
  switch (http_status) {
    case 400: case 405: case 413: case 422: case 431: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    default: return "server_error";
  }
}

}  // namespace

std::string ErrorCodeOf(const absl::Status& status) {
  std::string reason = ReasonOf(status);
  if (!reason.empty() && FindErrorReason(reason) != nullptr) return reason;
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange: return "invalid_request";
    case absl::StatusCode::kUnauthenticated: return "unauthenticated";
    case absl::StatusCode::kPermissionDenied: return "policy_denied";
    case absl::StatusCode::kNotFound: return "route_not_found";
    case absl::StatusCode::kResourceExhausted: return "queue_full";
    case absl::StatusCode::kUnavailable: return "worker_lost";
    case absl::StatusCode::kDeadlineExceeded: return "deadline_exceeded";
    case absl::StatusCode::kCancelled: return "cancelled";
    default: return "internal";
  }
}

std::string ErrorJson(const absl::Status& status) {
  int http = HttpStatusFor(status);
  json::Value error = json::Value::EmptyObject();
  std::string message(status.message());
  if (message.empty()) message = CodeName(status.code());
  error.Set("message", json::Value::String(message));
  error.Set("type", json::Value::String(ErrorType(http)));
  const std::string param = ParamOf(status);
  error.Set("param", param.empty() ? json::Value() : json::Value::String(param));
  error.Set("code", json::Value::String(ErrorCodeOf(status)));
  json::Value root = json::Value::EmptyObject();
  root.Set("error", std::move(error));
  return json::DumpCompact(root);
}

int RetryAfterSeconds(const absl::Status& status) {
  int http = HttpStatusFor(status);
  if (http != 429 && http != 503) return 0;
  uint32_t ms = RetryAfterMs(status);
  int seconds = static_cast<int>((static_cast<uint64_t>(ms) + 999) / 1000);
  return seconds < 1 ? 1 : seconds;
}

HttpResponse ErrorResponse(const absl::Status& status) {
  HttpResponse response;
  response.status = HttpStatusFor(status);
  if (response.status < 400) response.status = 500;  // an OK status is a caller bug
  response.headers.emplace_back("Content-Type", "application/json");
  if (int seconds = RetryAfterSeconds(status); seconds > 0) {
    response.headers.emplace_back("Retry-After", absl::StrCat(seconds));
  }
  response.body = ErrorJson(status);
  return response;
}

}  // namespace gantry::http
