// The router's states per worker identity (docs/protocol.md, "Router states, per worker
// identity") and the one function that moves between them: the broker (broker.cc,
// broker_registry.cc) classifies what arrived from an identity, asks NextWorkerStep
// what to do, does it, and logs every change as `broker.worker_state` (from, state)
// under these names.
//
//   UNKNOWN   no registration: only a READY the credentials permit is heard
//   LIVE      registered (worker_id, bundle, credit), dispatched to
//   EXPIRED   its registration is gone (in-flight failed worker_lost); the entry is
//             removed, and a later message from the identity is UNKNOWN's
//
// Thread-safety: pure functions.
#ifndef GANTRY_ROUTER_BROKER_WORKER_ENTRY_STATE_H_
#define GANTRY_ROUTER_BROKER_WORKER_ENTRY_STATE_H_

#include "absl/strings/string_view.h"

namespace gantry::broker {

enum class WorkerEntryState { kUnknown, kLive, kExpired };

// What arrived from an identity (or happened to it), classified.
enum class WorkerInput {
  kMalformed,          // frames that do not decode
  kReadyPermitted,     // a READY within the bounds that the key's grant permits
  kReadyNotAllowed,    // a READY naming a model or bundle the grant does not list / no grant
  kReadyIdTaken,       // a READY whose worker_id a LIVE worker of the same key holds
  kReadyOutOfBounds,   // a READY beyond the bounds of broker.h
  kHeartbeat,
  kPartialOrFinal,
  kDisconnect,
  kUnderAnotherKey,    // a message under another key than the READY's
  kSilent,             // nothing for `liveness` heartbeat intervals
  kSendFailed,         // SendFrames to it failed
};

enum class WorkerAction {
  kRegister,           // register worker_id, bundle, credit
  kRefuseReady,        // log broker.ready_refused with the code; DISCONNECT with it
  kDisconnect,         // DISCONNECT protocol_error
  kIgnore,
  kDrop,               // drop, count, log
  kHandle,             // refresh liveness, then HEARTBEAT: credit and reconcile;
                       // PARTIAL / FINAL: relay (FINAL frees one credit)
  kExpire,             // fail in-flight worker_lost, forget the registration
  kExpireDisconnect,   // kExpire, then DISCONNECT protocol_error
  kExpireRefuse,       // kExpire, then DISCONNECT worker_not_allowed
};

struct WorkerStep {
  WorkerEntryState next;
  WorkerAction action;
};

// "UNKNOWN", "LIVE", "EXPIRED".
absl::string_view WorkerEntryStateName(WorkerEntryState state);

// The table of docs/protocol.md. An EXPIRED entry is removed: any input is UNKNOWN's.
WorkerStep NextWorkerStep(WorkerEntryState state, WorkerInput input);

}  // namespace gantry::broker

#endif  // GANTRY_ROUTER_BROKER_WORKER_ENTRY_STATE_H_
