#include "common/status.h"

#include <gtest/gtest.h>

#include "gantry/v1/status.pb.h"

namespace gantry {
namespace {

TEST(StatusTest, ErrorCarriesReasonAndCode) {
  absl::Status s = Error(absl::StatusCode::kResourceExhausted, "queue_full", "queue of 64 is full");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ReasonOf(s), "queue_full");
  EXPECT_EQ(s.message(), "queue of 64 is full");
}

TEST(StatusTest, ReasonOfPlainStatusIsEmpty) {
  EXPECT_EQ(ReasonOf(absl::InternalError("x")), "");
  EXPECT_EQ(ReasonOf(absl::OkStatus()), "");
}

TEST(StatusTest, CodeNamesRoundTripForEveryCanonicalCode) {
  for (int c = 0; c <= 16; ++c) {
    auto code = static_cast<absl::StatusCode>(c);
    std::string name = CodeName(code);
    EXPECT_FALSE(name.empty());
    EXPECT_EQ(CodeFromName(name), code) << name;
  }
  EXPECT_EQ(CodeName(absl::StatusCode::kUnavailable), "UNAVAILABLE");
  EXPECT_EQ(CodeFromName("NOT_A_CODE"), absl::StatusCode::kUnknown);
  EXPECT_EQ(CodeFromName(""), absl::StatusCode::kUnknown);
}

TEST(StatusTest, ProtoRoundTripKeepsCodeReasonMessage) {
  v1::Status wire;
  ToProto(Error(absl::StatusCode::kInvalidArgument, "context_length_exceeded", "9000 > 8192"),
          &wire);
  EXPECT_EQ(wire.code(), "INVALID_ARGUMENT");
  EXPECT_EQ(wire.reason(), "context_length_exceeded");
  absl::Status back = FromProto(wire);
  EXPECT_EQ(back.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReasonOf(back), "context_length_exceeded");
  EXPECT_EQ(back.message(), "9000 > 8192");
}

TEST(StatusTest, RetryAfterTravelsThroughTheWireForm) {
  absl::Status busy = WithRetryAfter(Error(absl::StatusCode::kResourceExhausted, "queue_full", "full"), 1500);
  EXPECT_EQ(RetryAfterMs(busy), 1500u);
  v1::Status wire;
  ToProto(busy, &wire);
  EXPECT_EQ(wire.retry_after_ms(), 1500u);
  absl::Status back = FromProto(wire);
  EXPECT_EQ(RetryAfterMs(back), 1500u);
  EXPECT_EQ(ReasonOf(back), "queue_full");
  EXPECT_EQ(RetryAfterMs(absl::InternalError("x")), 0u);
  // A hint on success is meaningless and dropped.
  EXPECT_EQ(RetryAfterMs(WithRetryAfter(absl::OkStatus(), 10)), 0u);
}

TEST(StatusTest, OkProtoIsOkAndEmptyCodeIsNot) {
  v1::Status wire;
  ToProto(absl::OkStatus(), &wire);
  EXPECT_EQ(wire.code(), "OK");
  EXPECT_TRUE(FromProto(wire).ok());
  // A peer that forgot to set the code did not report success.
  EXPECT_EQ(FromProto(v1::Status()).code(), absl::StatusCode::kUnknown);
}

absl::StatusOr<int> Half(int x) {
  if (x % 2) return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::StatusOr<int> Quarter(int x) {
  GANTRY_ASSIGN_OR_RETURN(int half, Half(x));
  GANTRY_ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

TEST(StatusTest, AssignOrReturnPropagates) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gantry
