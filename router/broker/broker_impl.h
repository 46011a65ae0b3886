// The broker's implementation (broker.h), shared by its two files: broker.cc (the
// socket, the thread, requests: queues, dispatch, events, endings) and
// broker_registry.cc (the worker registry: READY and its refusals, heartbeats,
// expiry, the live bundles). Internal to them.
#ifndef GANTRY_ROUTER_BROKER_BROKER_IMPL_H_
#define GANTRY_ROUTER_BROKER_BROKER_IMPL_H_

#include <array>
#include <atomic>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>
#include <zmq.hpp>

#include "gantry/v1/worker.pb.h"
#include "proto/worker_frames.h"
#include "router/broker/broker.h"
#include "router/broker/worker_auth.h"
#include "router/broker/worker_entry_state.h"

namespace gantry::broker {
namespace internal {

inline constexpr int kPriorityClasses = 3;

// A ZeroMQ identity for logs: hex.
std::string Printable(const std::string& identity);

}  // namespace internal

class Broker::Impl {
 public:
  explicit Impl(BrokerOptions options) : options_(std::move(options)) {}
  ~Impl() { Stop(); }

  absl::StatusOr<std::string> Bind();
  void StartThread() {
    thread_ = std::thread([this] { Run(); });
  }
  void Run();
  void Stop();

  absl::Status Submit(v1::InferenceRequest request, std::shared_ptr<StreamSink> sink);
  void Cancel(const std::string& request_id, const std::string& reason);
  std::optional<v1::BundleIdentity> LiveBundle(const std::string& model) const;
  std::vector<std::string> LiveModels() const;
  uint32_t LiveWorkerCount(const std::string& model) const;
  std::vector<WorkerKv> WorkerKvUse() const;
  BrokerStats stats() const;

 private:
  struct Pending {
    v1::InferenceRequest request;
    std::shared_ptr<StreamSink> sink;
    std::string conversation;  // its ConversationKey, computed before the lock
  };
  // Why the broker ended a dispatched request (Cancel, deadline, seq gap).
  struct Ending {
    v1::FinishReason finish = v1::FINISH_ERROR;
    absl::Status status;
    int64_t since_us = 0;  // monotonic: when it was decided
  };
  struct InFlight {
    Pending pending;
    uint64_t next_seq = 0;         // the seq expected from the worker
    uint64_t relayed = 0;          // events passed to the sink
    // Set once the broker ended the request: nothing more is relayed, and the sink gets
    // its Terminal when the worker's FINAL comes or the worker is lost for it.
    std::optional<Ending> ending;
    int missing_heartbeats = 0;
    uint32_t completion_tokens = 0;  // the worker's running count (Partial)
    uint32_t output_events = 0;      // text, reasoning and tool-call events received
  };
  struct Worker {
    std::string identity;
    std::string worker_id;
    // The ZAP user id of the connection that sent READY (the CURVE key's fingerprint;
    // "" for plain workers). Every later message must come with the same.
    std::string user_id;
    v1::BundleIdentity bundle;
    uint32_t slots = 0;
    v1::KvCacheUse kv;  // as of its last READY or HEARTBEAT
    int64_t credit = 0;
    int64_t last_seen_us = 0;
    std::map<std::string, InFlight> in_flight;
  };

  // All below: precondition mu_ held.
  void Wake();
  // `user_id`: the connection's ZAP user id (the key's fingerprint with CURVE).
  void HandleMessage(std::vector<std::string> frames, const std::string& user_id);
  // Whether a line keyed `key` may be logged now (one per key per
  // kRefusalLogIntervalUs); `*since` is the number of occurrences it stands for.
  bool ThrottledLog(const std::string& key, int64_t* since);
  // DISCONNECT with a registration refusal (`code`: worker_not_allowed, ...).
  void SendRefusal(const std::string& identity, absl::string_view code, absl::string_view why);
  // What a READY is (worker_entry_state.h's input), with the refusal's code and why.
  struct ReadyVerdict {
    WorkerInput input = WorkerInput::kMalformed;
    std::string code;
    std::string why;
  };
  ReadyVerdict ClassifyReady(const v1::Ready& ready, const std::string& user_id) const;
  // UNKNOWN -> LIVE.
  void Register(const std::string& identity, const v1::Ready& ready, const std::string& user_id);
  // A LIVE worker lost (silent, unreachable): EXPIRED, as the table says.
  void Lose(const std::string& identity, WorkerInput why_input, absl::string_view why);
  // Refuses a READY: logs `broker.ready_refused` with `code`, counts it, and answers
  // DISCONNECT with that code. The sender stays UNKNOWN.
  void RefuseReady(const std::string& identity, const v1::Ready& ready,
                   const std::string& user_id, absl::string_view code,
                   absl::string_view why);
  void OnHeartbeat(Worker& worker, const v1::Heartbeat& heartbeat);
  void OnPartial(Worker& worker, const v1::Partial& partial);
  void OnFinal(Worker& worker, const v1::Final& final_message);
  // Marks the worker EXPIRED: fails its in-flight requests with worker_lost, forgets it.
  void Expire(std::string identity, absl::string_view why);
  void SendTo(std::string identity, const wire::WorkerMessage& message);
  void SendDisconnect(const std::string& identity, absl::string_view message);
  void Tick();
  void Dispatch();
  // The model's worker for `request`: its conversation's, else the least loaded; null
  // when none has credit.
  Worker* PickWorker(const std::string& model, const std::string& conversation);
  void Remember(const std::string& conversation, const std::string& identity);
  void FailQueuedIfNoWorker(const std::string& model);
  bool HasLiveWorker(const std::string& model) const;
  // The credit of the model's LIVE workers together.
  size_t FreeSlots(const std::string& model) const;
  void Deliver(InFlight& flight, v1::StreamEvent event);
  // Gives `sink` a Terminal the broker made: `finish` and `status`, on top of `accounting`
  // (usage, timings, bundle: what the request is charged; empty when it never ran).
  void Terminate(const std::string& request_id, uint64_t seq,
                 const std::shared_ptr<StreamSink>& sink, v1::FinishReason finish,
                 const absl::Status& status, v1::Terminal accounting = v1::Terminal());
  // The broker ends `flight` (see broker.h): nothing more is relayed and its Terminal
  // waits for the worker's FINAL. Sending the CANCEL is the caller's.
  void BeginEnding(InFlight& flight, v1::FinishReason finish, absl::Status status);
  // The Terminal of a flight the broker ended: its ending, with the usage, timings and
  // bundle of the worker's own `worker_terminal`, or (null) the usage the router knows.
  void FinishEnding(const std::string& request_id, InFlight& flight,
                    const v1::Terminal* worker_terminal);
  // The worker is gone for `flight`: its ending, or `lost`, with the usage the router
  // knows. The caller forgets the flight.
  void FailLost(const std::string& request_id, InFlight& flight, const absl::Status& lost);
  // Ends flights whose CANCEL went unanswered for cancel_ack_timeout_ms.
  void ExpireUnansweredCancels(int64_t now_us);
  // Receives and handles what has arrived on the socket, at most `max` messages.
  // Returns whether more may be waiting.
  bool DrainLocked(int max);
  // Whether the socket holds messages nobody has received yet. Asked after every use of
  // the socket from a thread other than the broker's: a send may consume the socket's
  // wake-up signal (ZMQ_FD is edge-triggered), and then the broker thread must be woken
  // so that it does not sleep on messages that already arrived.
  bool SocketReadableLocked();
  void DropFrame(absl::string_view event, const std::string& identity, absl::string_view why);
  // Rebuilds `bundles_` from the registry (after a worker came or went).
  void RefreshBundles();

  // Locks mu_; after unlocking, flushes the sinks that received events meanwhile (a
  // sink's Flush may then do real work, such as answering its client, without holding
  // up the broker's other callers).
  class Locked {
   public:
    explicit Locked(Impl* impl) : impl_(impl), lock_(impl->mu_) {}
    ~Locked() {
      std::vector<std::shared_ptr<StreamSink>> sinks;
      sinks.swap(impl_->touched_);
      lock_.unlock();
      for (const auto& sink : sinks) sink->Flush();
    }

   private:
    Impl* impl_;
    std::unique_lock<std::mutex> lock_;
  };

  BrokerOptions options_;
  zmq::context_t context_{1};
  zmq::socket_t socket_;
  std::unique_ptr<WorkerAuth> auth_;  // set when CURVE is on
  int event_fd_ = -1;
  int socket_fd_ = -1;  // the socket's ZMQ_FD: readable when the socket needs a look
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  bool stopped_ = false;

  mutable std::mutex mu_;
  std::unordered_map<std::string, Worker> workers_;  // by ZeroMQ identity
  std::unordered_map<std::string, std::string> owner_;  // request id -> worker identity
  // Conversation key -> the worker identity its last request went to, and its place in
  // conversation_order_ (least recently dispatched first; the first is forgotten beyond
  // kMaxConversations).
  struct ConversationEntry {
    std::string identity;
    std::list<std::string>::iterator order;
  };
  std::unordered_map<std::string, ConversationEntry> conversation_worker_;
  std::list<std::string> conversation_order_;
  std::map<std::string, std::array<std::deque<Pending>, internal::kPriorityClasses>> queues_;
  std::set<std::string> known_ids_;  // queued or in flight
  struct PendingCancel {
    std::string identity, request_id, reason;
  };
  std::vector<PendingCancel> cancels_to_send_;
  std::vector<std::shared_ptr<StreamSink>> touched_;  // sinks to Flush()
  // Model -> the bundle of one of its LIVE workers: what LiveBundle() answers (once per
  // request) without taking mu_, which the broker thread holds while it drains.
  mutable std::mutex bundles_mu_;
  std::map<std::string, v1::BundleIdentity> bundles_;
  int64_t last_heartbeat_sent_us_ = 0;
  BrokerStats stats_;
  // (code, key fingerprint or worker_id, model, bundle) -> when `broker.ready_refused`
  // last logged it; at most kMaxRefusalLogKeys.
  struct RefusalLog {
    int64_t last_logged_us = 0;
    uint64_t since_logged = 0;
  };
  std::unordered_map<std::string, RefusalLog> refusal_log_;
};

}  // namespace gantry::broker

#endif  // GANTRY_ROUTER_BROKER_BROKER_IMPL_H_
