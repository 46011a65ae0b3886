// docs/protocol.md, "Router states, per worker identity": one case per row, on the
// function the broker moves by (worker_entry_state.h). The broker's behaviour on each
// row, over real ZeroMQ, is broker_test's.
#include "router/broker/worker_entry_state.h"

#include <gtest/gtest.h>

#include <vector>

namespace gantry::broker {
namespace {

using S = WorkerEntryState;
using I = WorkerInput;
using A = WorkerAction;

TEST(WorkerEntryStateTest, EveryRowOfTheSpecsTable) {
  struct Row {
    const char* spec_row;
    S from;
    I input;
    S to;
    A action;
  };
  const std::vector<Row> rows = {
      {"UNKNOWN, valid READY the credentials permit", S::kUnknown, I::kReadyPermitted, S::kLive, A::kRegister},
      {"UNKNOWN, READY the key's grant does not list", S::kUnknown, I::kReadyNotAllowed, S::kUnknown, A::kRefuseReady},
      {"UNKNOWN, READY whose worker_id a LIVE worker holds", S::kUnknown, I::kReadyIdTaken, S::kUnknown, A::kRefuseReady},
      {"UNKNOWN, READY beyond the bounds", S::kUnknown, I::kReadyOutOfBounds, S::kUnknown, A::kRefuseReady},
      {"UNKNOWN, DISCONNECT", S::kUnknown, I::kDisconnect, S::kUnknown, A::kIgnore},
      {"UNKNOWN, anything else: a HEARTBEAT", S::kUnknown, I::kHeartbeat, S::kUnknown, A::kDisconnect},
      {"UNKNOWN, anything else: a FINAL", S::kUnknown, I::kPartialOrFinal, S::kUnknown, A::kDisconnect},
      {"UNKNOWN, anything else: an invalid READY", S::kUnknown, I::kMalformed, S::kUnknown, A::kDisconnect},
      {"LIVE, HEARTBEAT", S::kLive, I::kHeartbeat, S::kLive, A::kHandle},
      {"LIVE, PARTIAL / FINAL", S::kLive, I::kPartialOrFinal, S::kLive, A::kHandle},
      {"LIVE, READY again", S::kLive, I::kReadyPermitted, S::kExpired, A::kExpireDisconnect},
      {"LIVE, READY again, another claim", S::kLive, I::kReadyNotAllowed, S::kExpired, A::kExpireDisconnect},
      {"LIVE, malformed message", S::kLive, I::kMalformed, S::kLive, A::kDrop},
      {"LIVE, DISCONNECT received", S::kLive, I::kDisconnect, S::kExpired, A::kExpire},
      {"LIVE, silent 3 intervals", S::kLive, I::kSilent, S::kExpired, A::kExpire},
      {"LIVE, SendFrames fails", S::kLive, I::kSendFailed, S::kExpired, A::kExpire},
      {"LIVE, a message under another key (Worker identity)", S::kLive, I::kUnderAnotherKey, S::kExpired, A::kExpireRefuse},
      {"EXPIRED, the entry removed: a READY is UNKNOWN's", S::kExpired, I::kReadyPermitted, S::kLive, A::kRegister},
      {"EXPIRED, the entry removed: a HEARTBEAT is UNKNOWN's", S::kExpired, I::kHeartbeat, S::kUnknown, A::kDisconnect},
  };
  for (const Row& row : rows) {
    const WorkerStep step = NextWorkerStep(row.from, row.input);
    EXPECT_EQ(WorkerEntryStateName(step.next), WorkerEntryStateName(row.to)) << row.spec_row;
    EXPECT_EQ(static_cast<int>(step.action), static_cast<int>(row.action)) << row.spec_row;
  }
}

TEST(WorkerEntryStateTest, NamesAreTheSpecs) {
  EXPECT_EQ(WorkerEntryStateName(S::kUnknown), "UNKNOWN");
  EXPECT_EQ(WorkerEntryStateName(S::kLive), "LIVE");
  EXPECT_EQ(WorkerEntryStateName(S::kExpired), "EXPIRED");
}

}  // namespace
}  // namespace gantry::broker
