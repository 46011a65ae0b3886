#include "worker/server/worker_state.h"

#include "common/error_codes.h"

namespace gantry::server {

absl::string_view WorkerStateName(WorkerState state) {
  switch (state) {
    case WorkerState::kConnecting: return "CONNECTING";
    case WorkerState::kIdle: return "IDLE";
    case WorkerState::kServing: return "SERVING";
    case WorkerState::kDraining: return "DRAINING";
    case WorkerState::kGone: return "GONE";
  }
  return "UNKNOWN";
}

absl::string_view WorkerEventName(WorkerEvent event) {
  switch (event) {
    case WorkerEvent::kBundleRejected: return "bundle_rejected";
    case WorkerEvent::kReadySent: return "ready_sent";
    case WorkerEvent::kRequestAccepted: return "request_accepted";
    case WorkerEvent::kRequestEnded: return "request_ended";
    case WorkerEvent::kRouterLost: return "router_lost";
    case WorkerEvent::kShutdownRequested: return "shutdown_requested";
    case WorkerEvent::kDrained: return "drained";
  }
  return "unknown";
}

WorkerState NextWorkerState(WorkerState state, WorkerEvent event, int in_flight) {
  using S = WorkerState;
  using E = WorkerEvent;
  switch (state) {
    case S::kConnecting:
      switch (event) {
        case E::kReadySent: return S::kIdle;
        case E::kBundleRejected: return S::kGone;
        case E::kShutdownRequested: return S::kGone;  // no connection: nothing to drain
        default: return state;
      }
    case S::kIdle:
    case S::kServing:
      switch (event) {
        case E::kRequestAccepted: return S::kServing;
        case E::kRequestEnded: return in_flight > 0 ? S::kServing : S::kIdle;
        case E::kRouterLost: return S::kConnecting;  // in flight abandoned, a new socket
        case E::kShutdownRequested: return S::kDraining;
        default: return state;
      }
    case S::kDraining:
      switch (event) {
        case E::kDrained: return S::kGone;
        case E::kRouterLost: return S::kGone;  // nobody left to drain to
        default: return state;
      }
    case S::kGone:
      return state;
  }
  return state;
}

absl::Status AdmitRequest(WorkerState state, int free_slots) {
  if (state == WorkerState::kIdle || state == WorkerState::kServing) {
    if (free_slots > 0) return absl::OkStatus();
    return ReasonError("queue_full", "the worker has no free slot");
  }
  return ReasonError("no_worker", "the worker is draining; another worker takes new requests");
}

}  // namespace gantry::server
