#include "router/broker/worker_entry_state.h"

namespace gantry::broker {

absl::string_view WorkerEntryStateName(WorkerEntryState state) {
  switch (state) {
    case WorkerEntryState::kUnknown: return "UNKNOWN";
    case WorkerEntryState::kLive: return "LIVE";
    case WorkerEntryState::kExpired: return "EXPIRED";
  }
  return "UNKNOWN";
}

WorkerStep NextWorkerStep(WorkerEntryState state, WorkerInput input) {
  using S = WorkerEntryState;
  using I = WorkerInput;
  using A = WorkerAction;
  if (state == S::kExpired) state = S::kUnknown;  // the entry was removed
  if (state == S::kUnknown) {
    switch (input) {
      case I::kReadyPermitted: return {S::kLive, A::kRegister};
      case I::kReadyNotAllowed:
      case I::kReadyIdTaken:
      case I::kReadyOutOfBounds: return {S::kUnknown, A::kRefuseReady};
      case I::kDisconnect: return {S::kUnknown, A::kIgnore};
      case I::kSilent:
      case I::kSendFailed: return {S::kUnknown, A::kIgnore};  // nothing registered
      default: return {S::kUnknown, A::kDisconnect};  // anything else, malformed too
    }
  }
  switch (input) {  // LIVE
    case I::kHeartbeat:
    case I::kPartialOrFinal: return {S::kLive, A::kHandle};
    case I::kMalformed: return {S::kLive, A::kDrop};
    case I::kReadyPermitted:
    case I::kReadyNotAllowed:
    case I::kReadyIdTaken:
    case I::kReadyOutOfBounds: return {S::kExpired, A::kExpireDisconnect};  // READY again
    case I::kDisconnect:
    case I::kSilent:
    case I::kSendFailed: return {S::kExpired, A::kExpire};
    case I::kUnderAnotherKey: return {S::kExpired, A::kExpireRefuse};
  }
  return {S::kLive, A::kDrop};
}

}  // namespace gantry::broker
