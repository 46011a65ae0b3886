#include "common/status.h"

#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "gantry/v1/status.pb.h"

namespace gantry {
namespace {

// Type URL of the payload that carries the reason; part of no wire format (the wire
// carries v1::Status.reason), only of in-process statuses.
constexpr absl::string_view kReasonPayload = "gantry.dev/reason";
constexpr absl::string_view kRetryAfterPayload = "gantry.dev/retry_after_ms";
constexpr absl::string_view kParamPayload = "gantry.dev/param";

struct CodeNameEntry {
  absl::StatusCode code;
  const char* name;
};

constexpr CodeNameEntry kCodeNames[] = {
    {absl::StatusCode::kOk, "OK"},
    {absl::StatusCode::kCancelled, "CANCELLED"},
    {absl::StatusCode::kUnknown, "UNKNOWN"},
    {absl::StatusCode::kInvalidArgument, "INVALID_ARGUMENT"},
    {absl::StatusCode::kDeadlineExceeded, "DEADLINE_EXCEEDED"},
    {absl::StatusCode::kNotFound, "NOT_FOUND"},
    {absl::StatusCode::kAlreadyExists, "ALREADY_EXISTS"},
    {absl::StatusCode::kPermissionDenied, "PERMISSION_DENIED"},
    {absl::StatusCode::kResourceExhausted, "RESOURCE_EXHAUSTED"},
    {absl::StatusCode::kFailedPrecondition, "FAILED_PRECONDITION"},
    {absl::StatusCode::kAborted, "ABORTED"},
    {absl::StatusCode::kOutOfRange, "OUT_OF_RANGE"},
    {absl::StatusCode::kUnimplemented, "UNIMPLEMENTED"},
    {absl::StatusCode::kInternal, "INTERNAL"},
    {absl::StatusCode::kUnavailable, "UNAVAILABLE"},
    {absl::StatusCode::kDataLoss, "DATA_LOSS"},
    {absl::StatusCode::kUnauthenticated, "UNAUTHENTICATED"},
};

}  // namespace

absl::Status Error(absl::StatusCode code, absl::string_view reason,
                   absl::string_view message) {
  absl::Status status(code, message);
  if (!reason.empty()) status.SetPayload(kReasonPayload, absl::Cord(reason));
  return status;
}

std::string ReasonOf(const absl::Status& status) {
  auto payload = status.GetPayload(kReasonPayload);
  return payload ? std::string(*payload) : std::string();
}

absl::Status WithRetryAfter(absl::Status status, uint32_t retry_after_ms) {
  if (!status.ok() && retry_after_ms > 0) {
    status.SetPayload(kRetryAfterPayload, absl::Cord(std::to_string(retry_after_ms)));
  }
  return status;
}

uint32_t RetryAfterMs(const absl::Status& status) {
  auto payload = status.GetPayload(kRetryAfterPayload);
  uint32_t ms = 0;
  if (payload && absl::SimpleAtoi(std::string(*payload), &ms)) return ms;
  return 0;
}

absl::Status WithParam(absl::Status status, absl::string_view param) {
  if (!status.ok() && !param.empty()) status.SetPayload(kParamPayload, absl::Cord(param));
  return status;
}

std::string ParamOf(const absl::Status& status) {
  auto payload = status.GetPayload(kParamPayload);
  return payload ? std::string(*payload) : std::string();
}

std::string CodeName(absl::StatusCode code) {
  for (const auto& entry : kCodeNames) {
    if (entry.code == code) return entry.name;
  }
  return "UNKNOWN";
}

absl::StatusCode CodeFromName(absl::string_view name) {
  for (const auto& entry : kCodeNames) {
    if (name == entry.name) return entry.code;
  }
  return absl::StatusCode::kUnknown;
}

void ToProto(const absl::Status& status, v1::Status* out) {
  out->Clear();
  out->set_code(CodeName(status.code()));
  out->set_reason(ReasonOf(status));
  out->set_message(std::string(status.message()));
  out->set_retry_after_ms(RetryAfterMs(status));
}

absl::Status FromProto(const v1::Status& status) {
  absl::StatusCode code = CodeFromName(status.code());
  if (code == absl::StatusCode::kOk) return absl::OkStatus();
  return WithRetryAfter(Error(code, status.reason(), status.message()),
                        status.retry_after_ms());
}

}  // namespace gantry
