// The worker side of GNTW/1 (docs/protocol.md, "Worker protocol"): connects a DEALER
// to the router, announces READY with the bundle identity and capacity, answers
// REQUESTs with one Engine (engine.h: up to `slots` requests in one batch, on a
// scheduler thread), streams PARTIALs (each with the
// running count of tokens generated) and one FINAL per request (its usage: the work done,
// also when cancelled), honours CANCEL between decode steps and between prefill chunks,
// heartbeats both ways, and
// reconnects (a fresh socket and a new READY) when the router falls silent for
// liveness x interval or sends DISCONNECT.
//
// States (worker_state.h, logged by name as event worker.state): CONNECTING -> IDLE
// (READY sent) <-> SERVING (requests in flight); back to CONNECTING on silence or
// DISCONNECT (what was in flight is cancelled and its events dropped: the router has
// failed it); Stop() -> DRAINING (heartbeats say 0 free slots, new REQUESTs are refused
// no_worker, the ones in flight finish, or are cancelled at drain_timeout_ms) ->
// DISCONNECT -> GONE.
//
// Threading: Run() owns the DEALER socket; the scheduler sends its events to it over an
// inproc PUSH/PULL pair (ZeroMQ sockets are never shared between threads).
// Stop() may be called from any thread (a signal handler's thread included).
#ifndef GANTRY_WORKER_SERVER_WORKER_LOOP_H_
#define GANTRY_WORKER_SERVER_WORKER_LOOP_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "common/curve_keys.h"
#include "worker/server/engine.h"

namespace gantry::server {

struct WorkerOptions {
  std::string router_endpoint;   // e.g. "tcp://127.0.0.1:5555"
  std::string worker_id;         // default: "<host>/<pid>/<random>"
  int slots = 1;
  int capacity_per_slot = 0;     // tokens one sequence may hold (must be > 0)
  size_t kv_bytes = 0;           // the KV pool; 0: every slot's whole capacity
  model::KvType kv_type = model::KvType::kF16;  // how the pool keeps keys and values
  int threads = 1;               // forward-pass threads of the whole worker
  int heartbeat_interval_ms = 1000;
  int liveness = 3;
  // DRAINING: how long requests in flight may take to finish after Stop().
  int drain_timeout_ms = 30000;
  // CURVE client keys when the router is a CURVE server (another host); unset: plain.
  std::optional<CurveClientKeys> curve;
};

class WorkerLoop {
 public:
  WorkerLoop(WorkerOptions options, const ServingBundle& bundle);
  ~WorkerLoop();

  // Serves until Stop() and the drain; returns after sending DISCONNECT.
  void Run();
  // Begins the drain (any thread, a signal handler's included).
  void Stop() { stop_.store(true); }

 private:
  struct Impl;
  WorkerOptions options_;
  const ServingBundle& bundle_;
  std::atomic<bool> stop_{false};
  std::unique_ptr<Impl> impl_;
};

}  // namespace gantry::server

#endif  // GANTRY_WORKER_SERVER_WORKER_LOOP_H_
