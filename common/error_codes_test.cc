#include "common/error_codes.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "common/status.h"

namespace gantry {
namespace {

TEST(ErrorCodesTest, ReasonsAreUniqueSnakeCaseAndConsistent) {
  size_t n = 0;
  const ErrorReason* table = ErrorReasons(&n);
  ASSERT_GT(n, 10u);
  std::set<std::string> seen;
  for (size_t i = 0; i < n; ++i) {
    std::string reason = table[i].reason;
    EXPECT_TRUE(seen.insert(reason).second) << "duplicate " << reason;
    for (char c : reason) EXPECT_TRUE((c >= 'a' && c <= 'z') || c == '_') << reason;
    EXPECT_NE(table[i].code, absl::StatusCode::kOk) << reason;
    // Retry-After is only sent with 429 and 503; a retryable 4xx would be retried
    // forever by clients.
    if (table[i].retryable) {
      EXPECT_TRUE(table[i].http_status == 429 || table[i].http_status == 503 ||
                  table[i].http_status == 504)
          << reason;
    }
  }
}

TEST(ErrorCodesTest, RequestsThatCanNeverSucceedAre4xx) {
  for (const char* reason : {"invalid_json", "policy_denied", "model_not_found",
                             "context_length_exceeded", "tool_protocol_undeclared",
                             "template_render_failed"}) {
    absl::Status s = ReasonError(reason, "x");
    int http = HttpStatusFor(s);
    EXPECT_GE(http, 400) << reason;
    EXPECT_LT(http, 500) << reason;
    EXPECT_EQ(ReasonOf(s), reason);
  }
}

TEST(ErrorCodesTest, HttpFromReasonThenFromCode) {
  EXPECT_EQ(HttpStatusFor(ReasonError("queue_full", "")), 429);
  EXPECT_EQ(HttpStatusFor(ReasonError("no_worker", "")), 503);
  EXPECT_EQ(HttpStatusFor(ReasonError("template_render_failed", "")), 422);
  EXPECT_EQ(HttpStatusFor(absl::OkStatus()), 200);
  EXPECT_EQ(HttpStatusFor(absl::UnauthenticatedError("")), 401);
  EXPECT_EQ(HttpStatusFor(absl::UnimplementedError("")), 501);
  EXPECT_EQ(HttpStatusFor(absl::InternalError("")), 500);
  // An unknown reason falls back to the code.
  EXPECT_EQ(HttpStatusFor(Error(absl::StatusCode::kNotFound, "nope", "")), 404);
}

TEST(ErrorCodesTest, UnregisteredReasonBecomesInternalNotAbort) {
  absl::Status s = ReasonError("no_such_reason", "detail");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_NE(s.message().find("no_such_reason"), absl::string_view::npos);
}

}  // namespace
}  // namespace gantry
