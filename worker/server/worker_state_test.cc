// docs/protocol.md, "Worker states": one case per row of the table, on the function the
// worker's loop moves by (worker_state.h). The loop's behaviour in each state, over real
// ZeroMQ, is worker_loop_test's.
#include "worker/server/worker_state.h"

#include <gtest/gtest.h>

#include <vector>

#include "common/status.h"

namespace gantry::server {
namespace {

using S = WorkerState;
using E = WorkerEvent;

struct Row {
  const char* spec_row;
  S from;
  E event;
  int in_flight;  // after the event
  S to;
};

TEST(WorkerStateTest, EveryRowOfTheSpecsTable) {
  const std::vector<Row> rows = {
      {"CONNECTING, socket connected: READY", S::kConnecting, E::kReadySent, 0, S::kIdle},
      {"CONNECTING, bundle verification fails", S::kConnecting, E::kBundleRejected, 0, S::kGone},
      {"IDLE, REQUEST with a free slot", S::kIdle, E::kRequestAccepted, 1, S::kServing},
      {"SERVING, REQUEST with a free slot", S::kServing, E::kRequestAccepted, 2, S::kServing},
      {"SERVING, request ends, others left", S::kServing, E::kRequestEnded, 1, S::kServing},
      {"SERVING, request ends, none left", S::kServing, E::kRequestEnded, 0, S::kIdle},
      {"DRAINING, request ends", S::kDraining, E::kRequestEnded, 1, S::kDraining},
      {"DRAINING, the last request ends", S::kDraining, E::kRequestEnded, 0, S::kDraining},
      {"IDLE, router silent or DISCONNECT", S::kIdle, E::kRouterLost, 0, S::kConnecting},
      {"SERVING, router silent or DISCONNECT", S::kServing, E::kRouterLost, 0, S::kConnecting},
      {"IDLE, shutdown requested", S::kIdle, E::kShutdownRequested, 0, S::kDraining},
      {"SERVING, shutdown requested", S::kServing, E::kShutdownRequested, 2, S::kDraining},
      {"DRAINING, nothing left or the deadline passed", S::kDraining, E::kDrained, 0, S::kGone},
      {"DRAINING, router silent or DISCONNECT", S::kDraining, E::kRouterLost, 1, S::kGone},
      // Not in the table: what cannot move.
      {"CONNECTING, stopped before connecting", S::kConnecting, E::kShutdownRequested, 0, S::kGone},
      {"DRAINING, a second shutdown", S::kDraining, E::kShutdownRequested, 1, S::kDraining},
      {"GONE is final", S::kGone, E::kReadySent, 0, S::kGone},
      {"IDLE, a stray drained", S::kIdle, E::kDrained, 0, S::kIdle},
  };
  for (const Row& row : rows) {
    EXPECT_EQ(WorkerStateName(NextWorkerState(row.from, row.event, row.in_flight)),
              WorkerStateName(row.to))
        << row.spec_row;
  }
}

// The REQUEST rows: accepted with a free slot in IDLE and SERVING, refused queue_full
// without one, no_worker while DRAINING (and before READY).
TEST(WorkerStateTest, RequestsAreAdmittedByState) {
  EXPECT_TRUE(AdmitRequest(S::kIdle, 1).ok());
  EXPECT_TRUE(AdmitRequest(S::kServing, 1).ok());
  EXPECT_EQ(ReasonOf(AdmitRequest(S::kServing, 0)), "queue_full");
  EXPECT_EQ(ReasonOf(AdmitRequest(S::kDraining, 3)), "no_worker");
  EXPECT_EQ(ReasonOf(AdmitRequest(S::kConnecting, 3)), "no_worker");
}

TEST(WorkerStateTest, NamesAreTheSpecs) {
  EXPECT_EQ(WorkerStateName(S::kConnecting), "CONNECTING");
  EXPECT_EQ(WorkerStateName(S::kIdle), "IDLE");
  EXPECT_EQ(WorkerStateName(S::kServing), "SERVING");
  EXPECT_EQ(WorkerStateName(S::kDraining), "DRAINING");
  EXPECT_EQ(WorkerStateName(S::kGone), "GONE");
}

}  // namespace
}  // namespace gantry::server
