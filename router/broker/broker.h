// The router side of GNTW/1 (docs/protocol.md, "Worker protocol"): one ROUTER socket
// (ZMQ_ROUTER_MANDATORY) that workers connect to, the worker registry with its per-
// identity state machine (UNKNOWN -> LIVE -> EXPIRED; state names appear in logs),
// credit from READY/HEARTBEAT free_slots, heartbeats both ways, per-model admission
// queues, and prefix-aware dispatch (below).
//
// Registration (docs/protocol.md, "Worker identity"): READY is a claim, believed only
// as far as the worker's credentials allow. With CURVE, the key's allow-list grant must
// name the READY's model and bundle identity, else it is refused (`worker_not_allowed`);
// a READY whose worker_id a LIVE worker already holds is refused (`worker_id_taken`)
// and the LIVE one keeps serving; slots, context length, output cap, heartbeat interval
// and name lengths beyond the bounds below are refused (`protocol_error`). Each refusal
// is logged (`broker.ready_refused`, with `code`; at most one line per code and key or
// worker_id per 10 s, since a refused worker retries), counted (stats().ready_refused)
// and answered with DISCONNECT carrying the code. Without CURVE, workers are accepted only
// on an ipc:// endpoint whose directory only this user can open (owned by the effective
// uid, no group or other permission bits), checked at bind time, unless
// `insecure_workers` says otherwise (logged as a warning at start).
//
// Admission: Submit() decides synchronously: no LIVE worker serves the model ->
// UNAVAILABLE no_worker (503); the model's queue already holds `max_queue_per_model`
// requests beyond what its workers' free slots will take at the next dispatch ->
// RESOURCE_EXHAUSTED queue_full (429); both carry a retry hint. Otherwise
// the request waits in the model's FIFO of its priority class; classes are served
// accessibility first, then interactive, then batch. It is dispatched to the worker
// its conversation went to last, while that worker is LIVE with credit: a conversation
// is its model, principal and first two messages (an agent task's next turn repeats
// them), and the worker keeps that principal's prefix cached (worker/server/engine.h),
// so the turn reuses it. Otherwise, or for a first turn, to the LIVE worker of the
// model with the most credit (ties: fewest requests in flight). The broker remembers
// the last kMaxConversations conversations (the least recently dispatched forgotten
// first; the map is shared by all principals, so one sending very many conversations
// can push out the others: a slower turn, never another principal's data).
//
// Events: after an accepted Submit(), the sink receives the request's events in order
// and then exactly one Terminal, always: the worker's FINAL; or worker_lost (its worker
// died, sent DISCONNECT or READY again, went silent for `liveness` heartbeat intervals,
// became unroutable, or stopped listing the request in two consecutive HEARTBEATs);
// protocol_error (a gap in the worker's seq); deadline_exceeded; cancelled (Cancel());
// no_worker (the last worker of its model left while it was queued, or the broker
// stopped). Nothing is retried once any event reached the sink; a request the worker
// refused with queue_full before any event, or whose REQUEST could not be sent (its
// worker unroutable: that worker expires), is put back at the head of its queue.
//
// Ending a dispatched request (cancelled, deadline_exceeded, protocol_error): the broker
// relays nothing more, sends CANCEL, and keeps the request in flight on its worker
// (stats().in_flight, the worker's credit) until the worker's FINAL arrives; the sink's
// Terminal then says why the broker ended it and carries the usage, timings and bundle
// of the worker's FINAL, so that the request is charged what the worker did and its
// slot is free only once the worker has stopped. A worker that does not answer the
// CANCEL within `cancel_ack_timeout_ms`, or is lost meanwhile, is treated as lost for
// the request: the Terminal comes then, with the usage the router knows.
// Usage the router knows (every broker-made Terminal of a dispatched request): the
// request's router_prompt_tokens (the worker may have evaluated the prompt: fail closed)
// and the worker's last running count of generated tokens (Partial.completion_tokens),
// at least one token per output event received. A request that never left the queue
// carries no usage.
//
// Threading (the choice the design asked to document): one broker thread receives on
// the ZeroMQ socket, sends heartbeats and CANCELs, runs the timers and dispatches what
// waits for credit. Other threads (HTTP handlers) call Submit()/Cancel(), which change
// the shared state under one mutex. When a worker has a free slot, Submit() sends the
// REQUEST itself, under that mutex, so that admission and dispatch cost no thread
// hand-off; otherwise it queues and the broker thread dispatches when credit returns.
// The socket is used only under the mutex (ZeroMQ sockets may move between threads
// behind a full memory barrier); the broker thread sleeps on the socket's ZMQ_FD and an
// eventfd, and a thread that used the socket wakes it when messages are waiting (a send
// may consume ZMQ_FD's edge-triggered signal). We chose the lock over an inproc socket
// because admission must answer synchronously (429/503 before any byte of the response)
// and the state it reads (registry, queue lengths) is the broker's own.
// Sink callbacks run on the broker thread (or on the thread calling Submit() or
// Cancel()), with the broker's mutex held: they must be quick, must not block, and must
// not call back into the Broker.
//
// Thread-safety: all public methods are thread-safe.
#ifndef GANTRY_ROUTER_BROKER_BROKER_H_
#define GANTRY_ROUTER_BROKER_BROKER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "gantry/v1/bundle.pb.h"
#include "gantry/v1/inference.pb.h"

namespace gantry::broker {

// Receives one request's events. Called with the broker's mutex held (see above).
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  virtual void OnEvent(const v1::StreamEvent& event) = 0;
  // Called once after each batch of OnEvent calls (the events of one broker pass, e.g.
  // a worker's PARTIAL and FINAL that arrived together), on the same thread, after the
  // broker's mutex was released (so Flush may call into the Broker). A sink may hold
  // back waking its consumer until then, so that a consumer wakes once per batch
  // rather than once per event, or consume the events right here.
  virtual void Flush() {}
};

// The codes of a refused READY (docs/protocol.md, "Worker identity"): in the DISCONNECT
// the worker receives (Status.reason; code PERMISSION_DENIED / ALREADY_EXISTS) and in
// `broker.ready_refused`. Registration codes only: a client never receives them.
inline constexpr char kWorkerNotAllowed[] = "worker_not_allowed";
inline constexpr char kWorkerIdTaken[] = "worker_id_taken";

// Conversations whose worker the broker remembers.
inline constexpr size_t kMaxConversations = 65536;

// What a READY may claim at most (larger claims are refused, see above).
inline constexpr uint32_t kMaxWorkerSlots = 1024;
inline constexpr uint32_t kMaxContextLength = 1u << 21;  // 2,097,152 tokens
inline constexpr uint32_t kMaxReadyHeartbeatIntervalMs = 60000;
inline constexpr size_t kMaxWorkerIdBytes = 256;
// The largest frame the worker socket accepts (ZMQ_MAXMSGSIZE): a GNTW/1 body at most
// (wire::kMaxBodyBytes); a peer that announces a larger frame is disconnected by libzmq
// before any of it is buffered.
inline constexpr int64_t kMaxWorkerFrameBytes = int64_t{64} << 20;

// In WorkerGrant::models or ::bundles: any model, any bundle. No model name and no
// bundle identity is "*".
inline constexpr char kAnyWorkerGrant[] = "*";

// One entry of the worker allow-list (docs/protocol.md, "Worker allow-list"): a worker's
// public key and what its READY may name. Fail closed: an empty set permits nothing.
struct WorkerGrant {
  std::string key_z85;
  std::set<std::string> models;   // Ready.bundle.model values, or {kAnyWorkerGrant}
  std::set<std::string> bundles;  // Ready.bundle.identity_sha256 values, or {kAnyWorkerGrant}
};

// CURVE on the worker socket (docs/protocol.md, "CURVE and ZAP"): the router is the
// CURVE server; a ZAP handler admits only the listed worker public keys.
struct CurveServerOptions {
  std::string secret_key_z85;        // the router's secret key
  std::vector<WorkerGrant> workers;  // from ReadWorkerAllowListFile (worker_auth.h)
};

struct BrokerOptions {
  // Where workers connect: "tcp://127.0.0.1:5555", "tcp://127.0.0.1:*" (ephemeral;
  // see Broker::endpoint()), "ipc://DIR/NAME".
  std::string endpoint = "tcp://127.0.0.1:5555";
  std::optional<CurveServerOptions> curve;
  // Without CURVE, only an ipc:// endpoint in a directory only this user can open is
  // accepted, unless `insecure_workers` (--insecure-workers): then any endpoint is, and
  // a warning is logged at start (`broker.insecure_workers`).
  bool insecure_workers = false;
  uint32_t heartbeat_interval_ms = 1000;  // GNTW/1: kHeartbeatIntervalMs
  uint32_t liveness = 3;                  // GNTW/1: kHeartbeatLiveness
  size_t max_queue_per_model = 64;
  uint32_t retry_after_ms = 1000;         // hint on no_worker / queue_full / worker_lost
  // How long a request the broker ended waits for its worker's FINAL before the worker is
  // treated as lost for it; 0: liveness x heartbeat_interval_ms (the silence after which
  // a worker is dead).
  uint32_t cancel_ack_timeout_ms = 0;
  const Clock* clock = &SystemClock();
};

struct BrokerStats {
  uint64_t live_workers = 0;
  uint64_t queued = 0;
  uint64_t in_flight = 0;
  uint64_t dispatched = 0;
  // ... of which to the worker that served the conversation's previous turn.
  uint64_t dispatched_by_prefix = 0;
  uint64_t workers_expired = 0;
  uint64_t dropped_frames = 0;   // malformed, unknown request id, after a terminal
  uint64_t rejected_queue_full = 0;
  uint64_t rejected_no_worker = 0;
  uint64_t handshakes_admitted = 0;  // CURVE handshakes the ZAP handler admitted
  uint64_t handshakes_refused = 0;   // ... and refused (unknown key, malformed)
  // Requests the broker ended whose worker never answered the CANCEL in time.
  uint64_t cancels_unanswered = 0;
  // READYs refused: worker_not_allowed, worker_id_taken, out of bounds.
  uint64_t ready_refused = 0;
};

// What a LIVE worker last said of its KV cache (READY, then each HEARTBEAT).
// (Ready.kv_cache, docs/protocol.md.)
struct WorkerKv {
  std::string model;
  std::string worker_id;
  uint32_t block_tokens = 0;
  uint32_t blocks = 0;
  uint32_t blocks_in_use = 0;
  uint32_t blocks_cached = 0;
  uint64_t preemptions = 0;
  uint64_t bytes = 0;
  std::string type;  // "f16", "q8_0", or "unknown" (anything else a worker said)
};

class Broker {
 public:
  // Binds the ROUTER socket (a CURVE server with its ZAP handler when `curve` is set)
  // and starts the broker thread.
  // Errors: UNAVAILABLE when the endpoint cannot be bound; FAILED_PRECONDITION without
  // CURVE or `insecure_workers` for an endpoint other than ipc:// in a private directory
  // (the message names the directory's owner and mode, or --insecure-workers);
  // INVALID_ARGUMENT invalid_key_file for a key that does not decode; UNIMPLEMENTED
  // without CURVE in libzmq.
  static absl::StatusOr<std::unique_ptr<Broker>> Start(BrokerOptions options);

  // Stop(), then frees the socket.
  ~Broker();
  Broker(const Broker&) = delete;
  Broker& operator=(const Broker&) = delete;

  // The bound endpoint ("tcp://127.0.0.1:40123").
  const std::string& endpoint() const { return endpoint_; }

  // Admits `request` (request_id and model set; priority read from it).
  // Errors: UNAVAILABLE no_worker, RESOURCE_EXHAUSTED queue_full (both with a retry
  // hint), INVALID_ARGUMENT invalid_request (no request id, or one already in use).
  absl::Status Submit(v1::InferenceRequest request, std::shared_ptr<StreamSink> sink);

  // The client went away: a queued request ends at once; one in flight gets CANCEL on
  // the wire, nothing more is relayed, and its sink gets the `cancelled` Terminal when
  // the worker's FINAL comes (with its usage), or when the worker is treated as lost (see
  // above). Unknown or finished ids are ignored.
  void Cancel(const std::string& request_id, const std::string& reason);

  // Sends DISCONNECT to every LIVE worker, ends every request (queued: no_worker; in
  // flight: worker_lost, or the reason the broker already ended it, with the usage the
  // router knows), and stops the thread. Afterwards Submit() answers no_worker. Call it
  // before destroying what the sinks use (the Gateway): a cancelled request's Terminal may
  // still be on its way when the transports have stopped. Idempotent; not concurrently.
  void Stop();

  // The bundle a LIVE worker of `model` announced, if any.
  std::optional<v1::BundleIdentity> LiveBundle(const std::string& model) const;
  // Models with at least one LIVE worker, sorted.
  std::vector<std::string> LiveModels() const;
  // LIVE workers serving `model` now.
  uint32_t LiveWorkerCount(const std::string& model) const;
  // Every LIVE worker's KV cache, by worker_id.
  std::vector<WorkerKv> WorkerKvUse() const;
  BrokerStats stats() const;

  class Impl;

 private:
  Broker(std::unique_ptr<Impl> impl, std::string endpoint);
  std::unique_ptr<Impl> impl_;
  std::string endpoint_;
};

}  // namespace gantry::broker

#endif  // GANTRY_ROUTER_BROKER_BROKER_H_
