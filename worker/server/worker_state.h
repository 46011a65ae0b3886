// The worker's states on its connection to the router (docs/protocol.md, "Worker
// states") and the one function that moves between them. The names are the spec's and
// the logs' (event worker.state, field state): the loop (worker_loop.h) reports each
// event here and logs every change of state.
//
//   CONNECTING  a new socket; READY not yet sent
//   IDLE        READY sent, nothing in flight
//   SERVING     requests in flight
//   DRAINING    stopping: heartbeats say 0 free slots, new REQUESTs are refused
//               no_worker, the ones in flight finish (or are cancelled at the drain
//               deadline), then DISCONNECT
//   GONE        the loop has ended
//
// Thread-safety: pure functions.
#ifndef GANTRY_WORKER_SERVER_WORKER_STATE_H_
#define GANTRY_WORKER_SERVER_WORKER_STATE_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gantry::server {

enum class WorkerState { kConnecting, kIdle, kServing, kDraining, kGone };

enum class WorkerEvent {
  kBundleRejected,     // the bundle failed verification (no socket is opened)
  kReadySent,          // the socket is connected and READY went out
  kRequestAccepted,    // a REQUEST took a free slot
  kRequestEnded,       // a FINAL went out
  kRouterLost,         // the router was silent for liveness intervals, or sent DISCONNECT
  kShutdownRequested,  // Stop()
  kDrained,            // nothing left in flight, or the drain deadline passed
};

// "CONNECTING", "IDLE", "SERVING", "DRAINING", "GONE".
absl::string_view WorkerStateName(WorkerState state);
absl::string_view WorkerEventName(WorkerEvent event);

// The state after `event` in `state`, with `in_flight` requests in flight once the
// event has taken effect. An event the spec's table has no row for in `state` leaves
// it unchanged.
WorkerState NextWorkerState(WorkerState state, WorkerEvent event, int in_flight);

// Whether a REQUEST is accepted in `state` with `free_slots`: OK, or the refusal its
// FINAL carries (RESOURCE_EXHAUSTED queue_full: no free slot; UNAVAILABLE no_worker:
// draining, or not connected).
absl::Status AdmitRequest(WorkerState state, int free_slots);

}  // namespace gantry::server

#endif  // GANTRY_WORKER_SERVER_WORKER_STATE_H_
