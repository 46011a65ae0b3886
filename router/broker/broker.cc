#include "router/broker/broker.h"

#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>
#include <zmq.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/error_codes.h"
#include "common/log.h"
#include "common/status.h"
#include "common/zmq_io.h"
#include "gantry/v1/worker.pb.h"
#include "proto/worker_frames.h"
#include "router/broker/worker_auth.h"

namespace gantry::broker {
namespace {

constexpr int kPriorityClasses = 3;

// Serving order of the priority classes: accessibility, interactive, batch.
int ClassIndex(v1::PriorityClass priority) {
  switch (priority) {
    case v1::PRIORITY_ACCESSIBILITY: return 0;
    case v1::PRIORITY_BATCH: return 2;
    default: return 1;
  }
}

std::string Printable(const std::string& identity) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : identity) {
    out.push_back(hex[c >> 4]);
    out.push_back(hex[c & 15]);
  }
  return out;
}

// What a Terminal says the request used and where it ran: usage, timings, bundle.
v1::Terminal AccountingOf(const v1::Terminal& terminal) {
  v1::Terminal out;
  *out.mutable_usage() = terminal.usage();
  *out.mutable_timings() = terminal.timings();
  *out.mutable_bundle() = terminal.bundle();
  return out;
}

// What the router knows a dispatched request used when its worker's FINAL never came:
// the router's prompt count (the worker may have evaluated it; the router cannot tell a
// prefill in progress from one not begun, so it charges it) and the worker's last running
// count of generated tokens, at least one per output event received.
v1::Terminal KnownAccounting(const v1::InferenceRequest& request, uint32_t completion_tokens,
                             uint32_t output_events) {
  v1::Terminal out;
  out.mutable_usage()->set_prompt_tokens(request.router_prompt_tokens());
  out.mutable_usage()->set_completion_tokens(std::max(completion_tokens, output_events));
  return out;
}

// Without CURVE, anyone who can connect can register as a worker and read prompts: only
// an ipc:// socket in a directory that no one but this user can open (or inproc://) is
// private. OK when `endpoint` is one; otherwise FAILED_PRECONDITION saying why.
absl::Status PlainWorkersPrivate(const std::string& endpoint) {
  const std::string remedy =
      "give the router a CURVE key and a worker allow-list (--curve-key, --worker-keys), "
      "use ipc://DIR/NAME with DIR owned by this user and mode 0700, or accept the risk "
      "with --insecure-workers";
  if (absl::StartsWith(endpoint, "inproc://")) return absl::OkStatus();
  if (!absl::StartsWith(endpoint, "ipc://")) {
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing plain (non-CURVE) workers on ", endpoint,
        ": any process that can reach it could register as a worker and read prompts (",
        IsLocalEndpoint(endpoint) ? "every local user can" : "other hosts can", "); ", remedy));
  }
  const std::string path = endpoint.substr(6);
  if (path.empty() || path[0] == '@' || path == "*") {
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing plain workers on ", endpoint,
        ": an abstract or temporary ipc socket has no directory to protect it; ", remedy));
  }
  const size_t slash = path.rfind('/');
  const std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing plain workers on ", endpoint, ": cannot stat its directory ", dir, ": ",
        std::strerror(errno), "; make it (install -d -m 0700 ", dir, "), or ", remedy));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing plain workers on ", endpoint, ": ", dir,
        " is not a directory (a symbolic link is not followed); ", remedy));
  }
  if (st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing plain workers on ", endpoint, ": its directory ", dir, " is owned by uid ",
        st.st_uid, " with mode ", mode, ", so others may open it; it must be owned by uid ",
        geteuid(), " with no group or other permissions (chmod 700); or ", remedy));
  }
  return absl::OkStatus();
}

constexpr int64_t kRefusalLogIntervalUs = 10'000'000;
constexpr size_t kMaxRefusalLogKeys = 1024;

bool IsLowerHex64(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// What a READY claims beyond the bounds in broker.h: "" when nothing.
std::string ReadyOutOfBounds(const v1::Ready& ready) {
  const v1::BundleIdentity& b = ready.bundle();
  if (ready.worker_id().size() > kMaxWorkerIdBytes) {
    return absl::StrCat("worker_id longer than ", kMaxWorkerIdBytes, " bytes");
  }
  if (b.model().size() > 128) return "bundle.model longer than 128 bytes";
  if (!IsLowerHex64(b.identity_sha256())) {
    return "bundle.identity_sha256 is not 64 lowercase hex digits";
  }
  if (ready.slots() > kMaxWorkerSlots) {
    return absl::StrCat("slots ", ready.slots(), " > ", kMaxWorkerSlots);
  }
  if (b.context_length() > kMaxContextLength) {
    return absl::StrCat("bundle.context_length ", b.context_length(), " > ", kMaxContextLength);
  }
  // An output cap above the context is legal (the gateway reserves at most the room
  // left), but not beyond any context.
  if (b.default_max_tokens() > kMaxContextLength) {
    return absl::StrCat("bundle.default_max_tokens ", b.default_max_tokens(), " > ",
                        kMaxContextLength);
  }
  if (ready.heartbeat_interval_ms() > kMaxReadyHeartbeatIntervalMs) {
    return absl::StrCat("heartbeat_interval_ms ", ready.heartbeat_interval_ms(), " > ",
                        kMaxReadyHeartbeatIntervalMs);
  }
  return "";
}

// The Status of a DISCONNECT that refuses a READY (`worker_not_allowed`,
// `worker_id_taken`, `invalid_request`: docs/protocol.md, "Worker identity").
v1::Status RegistrationRefusal(absl::string_view reason, absl::string_view message) {
  v1::Status out;
  ToProto(ReasonError(reason, message), &out);
  return out;
}

}  // namespace

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
  BrokerStats stats() const;

 private:
  struct Pending {
    v1::InferenceRequest request;
    std::shared_ptr<StreamSink> sink;
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
  void OnReady(const std::string& identity, const v1::Ready& ready, const std::string& user_id);
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
  std::map<std::string, std::array<std::deque<Pending>, kPriorityClasses>> queues_;
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

absl::StatusOr<std::string> Broker::Impl::Bind() {
  if (!options_.curve) {
    absl::Status private_endpoint = PlainWorkersPrivate(options_.endpoint);
    if (!private_endpoint.ok() && !options_.insecure_workers) return private_endpoint;
    if (options_.insecure_workers) {
      Log(LogLevel::kWarning, "broker.insecure_workers",
          {{"endpoint", options_.endpoint},
           {"private", private_endpoint.ok() ? "yes" : "no"},
           {"why", "--insecure-workers: workers are not authenticated; any process that can "
                   "reach the endpoint can register as a worker and read prompts"}});
    }
  } else if (options_.insecure_workers) {
    Log(LogLevel::kWarning, "broker.insecure_workers",
        {{"endpoint", options_.endpoint},
         {"why", "--insecure-workers has no effect: CURVE is on, workers need a listed key"}});
  }
  try {
    SeedRouterIdentities();
    socket_ = zmq::socket_t(context_, zmq::socket_type::router);
    socket_.set(zmq::sockopt::router_mandatory, 1);
    socket_.set(zmq::sockopt::linger, 0);
    // Bounded before buffered: libzmq drops a connection that announces a larger frame
    // before it allocates or reads it.
    socket_.set(zmq::sockopt::maxmsgsize, kMaxWorkerFrameBytes);
    if (options_.curve) {
      auto auth = WorkerAuth::Install(context_, socket_, *options_.curve);
      if (!auth.ok()) return auth.status();
      auth_ = std::move(*auth);
    }
    socket_.bind(options_.endpoint);
  } catch (const zmq::error_t& e) {
    return absl::UnavailableError(absl::StrCat("bind ", options_.endpoint, ": ", e.what()));
  }
  event_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (event_fd_ < 0) return absl::InternalError("eventfd failed");
  socket_fd_ = socket_.get(zmq::sockopt::fd);
  return LastEndpoint(socket_);
}

void Broker::Impl::Wake() {
  uint64_t one = 1;
  ssize_t n = write(event_fd_, &one, sizeof(one));
  (void)n;
}

void Broker::Impl::Stop() {
  if (stopped_) return;
  stopped_ = true;
  stopping_ = true;
  if (event_fd_ >= 0) Wake();
  if (thread_.joinable()) thread_.join();
  {
    Locked lock(this);
    std::vector<std::string> identities;
    for (auto& [identity, worker] : workers_) identities.push_back(identity);
    for (const auto& identity : identities) {
      SendTo(identity, [] {
        v1::Disconnect d;
        ToProto(ReasonError("no_worker", "the router is shutting down"), d.mutable_reason());
        return wire::WorkerMessage(d);
      }());
      Expire(identity, "router stopping");
    }
    for (auto& [model, classes] : queues_) {
      for (auto& queue : classes) {
        for (auto& pending : queue) {
          Terminate(pending.request.request_id(), 0, pending.sink, v1::FINISH_ERROR,
                    WithRetryAfter(ReasonError("no_worker", "the router is shutting down"),
                                   options_.retry_after_ms));
        }
        queue.clear();
      }
    }
    known_ids_.clear();
  }
  socket_.close();
  if (auth_) auth_->Close();
  if (event_fd_ >= 0) close(event_fd_);
  event_fd_ = -1;
}

void Broker::Impl::Run() {
  pthread_setname_np(pthread_self(), "broker");  // shown by top -H and perf
  bool more = false;  // messages may be waiting: look again without sleeping
  while (!stopping_) {
    // The socket itself is only touched under mu_ (other threads send on it too, see
    // Submit); here the thread sleeps on its ZMQ_FD, a plain fd.
    zmq::pollitem_t items[] = {
        {nullptr, socket_fd_, ZMQ_POLLIN, 0},
        {nullptr, event_fd_, ZMQ_POLLIN, 0},
        {auth_ ? static_cast<void*>(auth_->zap_socket()) : nullptr, -1, ZMQ_POLLIN, 0},
    };
    long timeout_ms = more ? 0 : std::max<long>(10, options_.heartbeat_interval_ms / 4);
    try {
      zmq::poll(items, auth_ ? 3 : 2, std::chrono::milliseconds(timeout_ms));
    } catch (const zmq::error_t&) {
      continue;  // EINTR
    }
    if (auth_ && (items[2].revents & ZMQ_POLLIN)) auth_->AnswerPending();
    if (items[1].revents & ZMQ_POLLIN) {
      uint64_t count;
      while (read(event_fd_, &count, sizeof(count)) > 0) {
      }
    }
    Locked lock(this);
    // Drain what arrived (bounded per round so that ticks still happen).
    more = DrainLocked(1000);
    std::vector<PendingCancel> cancels;
    cancels.swap(cancels_to_send_);
    for (const auto& c : cancels) {
      if (!workers_.count(c.identity)) continue;
      v1::Cancel cancel;
      cancel.set_request_id(c.request_id);
      cancel.set_reason(c.reason);
      SendTo(c.identity, cancel);
    }
    Tick();
    Dispatch();
    more = more || SocketReadableLocked();
  }
}

bool Broker::Impl::DrainLocked(int max) {
  for (int i = 0; i < max; ++i) {
    RecvMetadata metadata;
    auto frames = RecvFrames(socket_, 0, RecvLimits(), &metadata);
    if (!frames.ok()) {
      if (absl::IsDeadlineExceeded(frames.status())) return false;
      if (absl::IsUnavailable(frames.status())) return false;
      ++stats_.dropped_frames;
      Log(LogLevel::kWarning, "broker.frame_dropped",
          {{"why", std::string(frames.status().message())}});
      continue;
    }
    HandleMessage(std::move(*frames), metadata.user_id);
  }
  return true;
}

bool Broker::Impl::SocketReadableLocked() {
  try {
    return (socket_.get(zmq::sockopt::events) & ZMQ_POLLIN) != 0;
  } catch (const zmq::error_t&) {
    return false;  // the socket is closing
  }
}

void Broker::Impl::DropFrame(absl::string_view event, const std::string& identity,
                             absl::string_view why) {
  ++stats_.dropped_frames;
  Log(LogLevel::kWarning, event, {{"identity", Printable(identity)}, {"why", std::string(why)}});
}

void Broker::Impl::SendTo(std::string identity, const wire::WorkerMessage& message) {
  std::vector<std::string> frames = wire::EncodeFrames(message);
  frames.insert(frames.begin(), identity);
  absl::Status status = SendFrames(socket_, frames);
  if (!status.ok() && workers_.count(identity)) {
    Expire(identity, absl::StrCat("send failed: ", status.message()));
  }
}

void Broker::Impl::SendDisconnect(const std::string& identity, absl::string_view message) {
  v1::Disconnect d;
  ToProto(ReasonError("protocol_error", message), d.mutable_reason());
  std::vector<std::string> frames = wire::EncodeFrames(d);
  frames.insert(frames.begin(), identity);
  (void)SendFrames(socket_, frames);  // best effort: the peer is not LIVE
}

void Broker::Impl::HandleMessage(std::vector<std::string> frames, const std::string& user_id) {
  if (frames.empty()) return;
  std::string identity = std::move(frames.front());
  frames.erase(frames.begin());
  auto it = workers_.find(identity);
  bool live = it != workers_.end();
  auto decoded = wire::DecodeFrames(frames, wire::Direction::kWorkerToRouter);
  if (!decoded.ok()) {
    if (live) {
      DropFrame("broker.frame_dropped", identity, decoded.status().message());
    } else {
      ++stats_.dropped_frames;
      Log(LogLevel::kWarning, "broker.unknown_peer_rejected",
          {{"identity", Printable(identity)}, {"state", "UNKNOWN"},
           {"why", std::string(decoded.status().message())}});
      SendDisconnect(identity, decoded.status().message());
    }
    return;
  }
  wire::WorkerMessage& message = *decoded;
  if (auto* ready = std::get_if<v1::Ready>(&message)) {
    if (live) {
      Log(LogLevel::kWarning, "broker.ready_again",
          {{"identity", Printable(identity)}, {"state", "LIVE"}, {"next", "EXPIRED"}});
      Expire(identity, "READY from a LIVE worker");
      SendDisconnect(identity, "READY received from a LIVE worker");
      return;
    }
    OnReady(identity, *ready, user_id);
    return;
  }
  if (!live) {
    if (std::holds_alternative<v1::Disconnect>(message)) return;
    ++stats_.dropped_frames;
    int64_t count = 0;
    if (ThrottledLog(absl::StrCat("unknown|", user_id), &count)) {
      Log(LogLevel::kInfo, "broker.unknown_peer_rejected",
          {{"identity", Printable(identity)}, {"state", "UNKNOWN"},
           {"key_fingerprint", user_id.empty() ? "none" : user_id},
           {"command", wire::CommandName(wire::CommandOf(message))},
           {"messages", absl::StrCat(count)}});
    }
    SendDisconnect(identity, "not registered: send READY first");
    return;
  }
  Worker& worker = it->second;
  if (user_id != worker.user_id) {
    // A peer may choose its routing id: once the connection that sent READY is gone,
    // another may take the same id. Under another key it is not this worker: nothing
    // it says is believed, and nothing more is sent to this identity (found by a red
    // team: an allowed key for another model squatted a dead worker's id, received its
    // prompts and answered them).
    ++stats_.dropped_frames;
    int64_t count = 0;
    if (ThrottledLog(absl::StrCat(kWorkerNotAllowed, "|mismatch|", user_id), &count)) {
      Log(LogLevel::kWarning, "broker.worker_key_mismatch",
          {{"code", kWorkerNotAllowed}, {"identity", Printable(identity)},
           {"worker_id", worker.worker_id},
           {"registered_key", worker.user_id.empty() ? "none" : worker.user_id},
           {"key_fingerprint", user_id.empty() ? "none" : user_id},
           {"messages", absl::StrCat(count)}});
    }
    Expire(identity, "a message under another key than its READY's");
    SendRefusal(identity, kWorkerNotAllowed, "this identity is registered under another key");
    return;
  }
  worker.last_seen_us = options_.clock->MonotonicMicros();
  if (auto* hb = std::get_if<v1::Heartbeat>(&message)) {
    OnHeartbeat(worker, *hb);
  } else if (auto* partial = std::get_if<v1::Partial>(&message)) {
    OnPartial(worker, *partial);
  } else if (auto* final_message = std::get_if<v1::Final>(&message)) {
    OnFinal(worker, *final_message);
  } else if (std::holds_alternative<v1::Disconnect>(message)) {
    Expire(identity, "DISCONNECT received");
  }
}

void Broker::Impl::RefuseReady(const std::string& identity, const v1::Ready& ready,
                               const std::string& user_id, absl::string_view code,
                               absl::string_view why) {
  ++stats_.ready_refused;
  // A refused worker reconnects and tries again: one line per (code, key or worker_id,
  // claim) per kRefusalLogIntervalUs, with the refusals since the last line.
  const std::string who =
      user_id.empty() ? ready.worker_id().substr(0, kMaxWorkerIdBytes) : user_id;
  const std::string log_key =
      absl::StrCat(code, "|", who, "|", ready.bundle().model().substr(0, 128), "|",
                   ready.bundle().identity_sha256().substr(0, 64));
  int64_t refusals = 0;
  if (ThrottledLog(log_key, &refusals)) {
    Log(LogLevel::kWarning, "broker.ready_refused",
        {{"code", std::string(code)}, {"identity", Printable(identity)},
         {"key_fingerprint", user_id.empty() ? "none" : user_id},
         {"worker_id", ready.worker_id().substr(0, kMaxWorkerIdBytes)},
         {"model", ready.bundle().model().substr(0, 128)},
         {"bundle", ready.bundle().identity_sha256().substr(0, 64)},
         {"refusals", absl::StrCat(refusals)}, {"why", std::string(why)}});
  }
  SendRefusal(identity, code, why);
}

void Broker::Impl::SendRefusal(const std::string& identity, absl::string_view code,
                               absl::string_view why) {
  v1::Disconnect d;
  *d.mutable_reason() = RegistrationRefusal(code, why);
  std::vector<std::string> frames = wire::EncodeFrames(d);
  frames.insert(frames.begin(), identity);
  (void)SendFrames(socket_, frames);  // best effort: the peer is not LIVE
}

bool Broker::Impl::ThrottledLog(const std::string& key, int64_t* since) {
  const int64_t now = options_.clock->MonotonicMicros();
  if (refusal_log_.size() >= kMaxRefusalLogKeys && refusal_log_.count(key) == 0) {
    refusal_log_.clear();  // bounded: a flood of distinct keys costs lines, not memory
  }
  RefusalLog& entry = refusal_log_[key];
  ++entry.since_logged;
  if (entry.last_logged_us != 0 && now - entry.last_logged_us < kRefusalLogIntervalUs) {
    return false;
  }
  *since = static_cast<int64_t>(entry.since_logged);
  entry.last_logged_us = now;
  entry.since_logged = 0;
  return true;
}

void Broker::Impl::OnReady(const std::string& identity, const v1::Ready& ready,
                           const std::string& user_id) {
  // READY is a claim: bounded, checked against the key's grant, and never allowed to
  // displace a LIVE worker.
  if (std::string why = ReadyOutOfBounds(ready); !why.empty()) {
    RefuseReady(identity, ready, user_id, "protocol_error",
                absl::StrCat("READY out of bounds: ", why));
    return;
  }
  if (auth_) {
    const WorkerGrant* grant = auth_->GrantFor(user_id);
    if (grant == nullptr) {
      RefuseReady(identity, ready, user_id, kWorkerNotAllowed,
                  "the connection's key is not in the worker allow-list");
      return;
    }
    if (!GrantPermits(*grant, ready.bundle().model(), ready.bundle().identity_sha256())) {
      RefuseReady(identity, ready, user_id, kWorkerNotAllowed,
                  absl::StrCat("the worker allow-list does not let this key serve model '",
                               ready.bundle().model().substr(0, 128), "' with bundle ",
                               ready.bundle().identity_sha256()));
      return;
    }
  }
  for (const auto& [other_identity, other] : workers_) {
    // worker_ids are per key: another key's READY cannot hold a name this key serves
    // under (found by a red team: an allowed key for another model registered the real
    // worker's worker_id first and locked it out).
    if (other.worker_id != ready.worker_id() || other.user_id != user_id) continue;
    // A worker that reconnects (a new socket, a new identity) is admitted once its old
    // registration has expired: within `liveness` heartbeat intervals.
    RefuseReady(identity, ready, user_id, kWorkerIdTaken,
                absl::StrCat("worker_id '", ready.worker_id(),
                             "' is held by a LIVE worker (identity ", Printable(other_identity),
                             ")"));
    return;
  }
  Worker worker;
  worker.identity = identity;
  worker.worker_id = ready.worker_id();
  worker.user_id = user_id;
  worker.bundle = ready.bundle();
  worker.slots = ready.slots();
  worker.credit = ready.free_slots();
  worker.last_seen_us = options_.clock->MonotonicMicros();
  workers_[identity] = std::move(worker);
  RefreshBundles();
  Log(LogLevel::kInfo, "broker.worker_state",
      {{"worker_id", ready.worker_id()}, {"identity", Printable(identity)},
       {"from", "UNKNOWN"}, {"state", "LIVE"}, {"model", ready.bundle().model()},
       {"bundle", ready.bundle().identity_sha256()},
       {"slots", absl::StrCat(ready.slots())}});
}

void Broker::Impl::OnHeartbeat(Worker& worker, const v1::Heartbeat& heartbeat) {
  const std::string identity = worker.identity;
  std::set<std::string> active(heartbeat.active_request_ids().begin(),
                               heartbeat.active_request_ids().end());
  // The worker works on something we do not know (any more): cancel it.
  for (const auto& id : active) {
    if (!worker.in_flight.count(id)) {
      v1::Cancel cancel;
      cancel.set_request_id(id);
      cancel.set_reason("unknown to the router");
      SendTo(identity, cancel);
      if (!workers_.count(identity)) return;
    }
  }
  // Sent but missing from two consecutive heartbeats: lost.
  int64_t on_the_wire = 0;
  std::vector<std::string> lost;
  for (auto& [id, flight] : worker.in_flight) {
    if (active.count(id)) {
      flight.missing_heartbeats = 0;
      continue;
    }
    ++on_the_wire;
    if (++flight.missing_heartbeats >= 2) lost.push_back(id);
  }
  for (const auto& id : lost) {
    auto it = worker.in_flight.find(id);
    FailLost(id, it->second,
             WithRetryAfter(ReasonError("worker_lost", "the worker no longer reports this request"),
                            options_.retry_after_ms));
    owner_.erase(id);
    known_ids_.erase(id);
    worker.in_flight.erase(it);
    --on_the_wire;
  }
  // Never more credit than the slots READY announced (within kMaxWorkerSlots).
  const int64_t free_slots = std::min<int64_t>(heartbeat.free_slots(), worker.slots);
  worker.credit = free_slots - std::max<int64_t>(0, on_the_wire);
}

void Broker::Impl::Deliver(InFlight& flight, v1::StreamEvent event) {
  ++flight.next_seq;
  if (flight.ending) return;
  event.set_seq(flight.relayed++);
  flight.pending.sink->OnEvent(event);
  if (touched_.empty() || touched_.back() != flight.pending.sink) {
    touched_.push_back(flight.pending.sink);
  }
}

void Broker::Impl::OnPartial(Worker& worker, const v1::Partial& partial) {
  auto it = worker.in_flight.find(partial.request_id());
  if (it == worker.in_flight.end()) {
    DropFrame("broker.partial_unknown_request", worker.identity, partial.request_id());
    return;
  }
  InFlight& flight = it->second;
  flight.completion_tokens = std::max(flight.completion_tokens, partial.completion_tokens());
  for (const auto& event : partial.events()) {
    if (event.has_text() || event.has_reasoning() || event.has_tool_call()) ++flight.output_events;
    if (flight.ending) continue;  // ended by the broker: counted, not relayed
    if (event.seq() != flight.next_seq) {
      // A lost frame: the stream cannot be trusted any more. The Terminal waits for the
      // worker's FINAL, which says what the request used.
      BeginEnding(flight, v1::FINISH_ERROR,
                  ReasonError("protocol_error",
                              absl::StrCat("seq gap from the worker: expected ", flight.next_seq,
                                           ", got ", event.seq())));
      v1::Cancel cancel;
      cancel.set_request_id(partial.request_id());
      cancel.set_reason("protocol_error");
      SendTo(worker.identity, cancel);
      return;
    }
    if (event.has_admitted()) {
      // Router -> client only (docs/protocol.md): a worker has no business sending it.
      ++flight.next_seq;
      DropFrame("broker.worker_sent_admitted", worker.identity, partial.request_id());
      continue;
    }
    Deliver(flight, event);
  }
}

void Broker::Impl::OnFinal(Worker& worker, const v1::Final& final_message) {
  auto it = worker.in_flight.find(final_message.request_id());
  if (it == worker.in_flight.end()) {
    DropFrame("broker.final_unknown_request", worker.identity, final_message.request_id());
    return;
  }
  ++worker.credit;
  InFlight flight = std::move(it->second);
  worker.in_flight.erase(it);
  const std::string& id = final_message.request_id();
  owner_.erase(id);
  const v1::Terminal& terminal = final_message.terminal().terminal();
  // Refused for lack of a slot before anything reached the client: queue it again.
  if (!flight.ending && flight.relayed == 0 && terminal.finish_reason() == v1::FINISH_ERROR &&
      terminal.status().reason() == "queue_full") {
    worker.credit = 0;  // it told us it is full
    auto& queue = queues_[flight.pending.request.model()]
                      [ClassIndex(flight.pending.request.priority())];
    queue.push_front(std::move(flight.pending));
    return;
  }
  known_ids_.erase(id);
  if (flight.ending) {
    // The answer to our CANCEL (or a FINAL that crossed it): the end the broker decided,
    // with what the worker says it did.
    FinishEnding(id, flight, &terminal);
    return;
  }
  v1::StreamEvent event = final_message.terminal();
  if (event.seq() != flight.next_seq) {
    Terminate(id, flight.relayed, flight.pending.sink, v1::FINISH_ERROR,
              ReasonError("protocol_error", absl::StrCat("seq gap before FINAL: expected ",
                                                         flight.next_seq, ", got ", event.seq())),
              AccountingOf(terminal));
    return;
  }
  Deliver(flight, std::move(event));
}


void Broker::Impl::BeginEnding(InFlight& flight, v1::FinishReason finish, absl::Status status) {
  Ending ending;
  ending.finish = finish;
  ending.status = std::move(status);
  ending.since_us = options_.clock->MonotonicMicros();
  flight.ending = std::move(ending);
}

void Broker::Impl::FinishEnding(const std::string& request_id, InFlight& flight,
                                const v1::Terminal* worker_terminal) {
  const Ending& ending = *flight.ending;
  Terminate(request_id, flight.relayed, flight.pending.sink, ending.finish, ending.status,
            worker_terminal != nullptr
                ? AccountingOf(*worker_terminal)
                : KnownAccounting(flight.pending.request, flight.completion_tokens,
                                  flight.output_events));
}

void Broker::Impl::FailLost(const std::string& request_id, InFlight& flight,
                            const absl::Status& lost) {
  if (flight.ending) {
    FinishEnding(request_id, flight, nullptr);
    return;
  }
  Terminate(request_id, flight.relayed, flight.pending.sink, v1::FINISH_ERROR, lost,
            KnownAccounting(flight.pending.request, flight.completion_tokens,
                            flight.output_events));
}

void Broker::Impl::ExpireUnansweredCancels(int64_t now_us) {
  const int64_t timeout_us =
      int64_t{options_.cancel_ack_timeout_ms > 0
                  ? options_.cancel_ack_timeout_ms
                  : options_.heartbeat_interval_ms * options_.liveness} * 1000;
  for (auto& [identity, worker] : workers_) {
    for (auto it = worker.in_flight.begin(); it != worker.in_flight.end();) {
      InFlight& flight = it->second;
      if (!flight.ending || now_us - flight.ending->since_us < timeout_us) {
        ++it;
        continue;
      }
      // The worker may still be at it: its credit stays taken until a HEARTBEAT says
      // otherwise, and a HEARTBEAT listing the id gets another CANCEL.
      ++stats_.cancels_unanswered;
      Log(LogLevel::kWarning, "broker.cancel_unanswered",
          {{"worker_id", worker.worker_id}, {"identity", Printable(identity)},
           {"request_id", it->first},
           {"waited_ms", absl::StrCat((now_us - flight.ending->since_us) / 1000)}});
      FinishEnding(it->first, flight, nullptr);
      owner_.erase(it->first);
      known_ids_.erase(it->first);
      it = worker.in_flight.erase(it);
    }
  }
}

void Broker::Impl::Terminate(const std::string& request_id, uint64_t seq,
                             const std::shared_ptr<StreamSink>& sink, v1::FinishReason finish,
                             const absl::Status& status, v1::Terminal accounting) {
  v1::StreamEvent event;
  event.set_request_id(request_id);
  event.set_seq(seq);
  v1::Terminal* terminal = event.mutable_terminal();
  *terminal = std::move(accounting);
  terminal->set_finish_reason(finish);
  ToProto(status, terminal->mutable_status());
  if (RetryAfterMs(status) > 0) terminal->mutable_status()->set_retry_after_ms(RetryAfterMs(status));
  sink->OnEvent(event);
  touched_.push_back(sink);
}

void Broker::Impl::Expire(std::string identity, absl::string_view why) {
  auto it = workers_.find(identity);
  if (it == workers_.end()) return;
  Worker worker = std::move(it->second);
  workers_.erase(it);
  RefreshBundles();
  ++stats_.workers_expired;
  Log(LogLevel::kWarning, "broker.worker_state",
      {{"worker_id", worker.worker_id}, {"identity", Printable(identity)}, {"from", "LIVE"},
       {"state", "EXPIRED"}, {"why", std::string(why)},
       {"in_flight", absl::StrCat(worker.in_flight.size())}});
  for (auto& [id, flight] : worker.in_flight) {
    owner_.erase(id);
    known_ids_.erase(id);
    FailLost(id, flight,
             WithRetryAfter(ReasonError("worker_lost",
                                        absl::StrCat("the worker serving this request was lost: ",
                                                     why)),
                            options_.retry_after_ms));
  }
  FailQueuedIfNoWorker(worker.bundle.model());
}

bool Broker::Impl::HasLiveWorker(const std::string& model) const {
  for (const auto& [identity, worker] : workers_) {
    if (worker.bundle.model() == model) return true;
  }
  return false;
}

size_t Broker::Impl::FreeSlots(const std::string& model) const {
  size_t free = 0;
  for (const auto& [identity, worker] : workers_) {
    if (worker.bundle.model() == model && worker.credit > 0) free += static_cast<size_t>(worker.credit);
  }
  return free;
}

void Broker::Impl::FailQueuedIfNoWorker(const std::string& model) {
  if (HasLiveWorker(model)) return;
  auto it = queues_.find(model);
  if (it == queues_.end()) return;
  for (auto& queue : it->second) {
    for (auto& pending : queue) {
      known_ids_.erase(pending.request.request_id());
      Terminate(pending.request.request_id(), 0, pending.sink, v1::FINISH_ERROR,
                WithRetryAfter(ReasonError("no_worker",
                                           absl::StrCat("no live worker serves '", model, "'")),
                               options_.retry_after_ms));
    }
    queue.clear();
  }
}

void Broker::Impl::Tick() {
  const int64_t now = options_.clock->MonotonicMicros();
  const int64_t interval_us = int64_t{options_.heartbeat_interval_ms} * 1000;
  // Silent workers.
  std::vector<std::string> silent;
  for (const auto& [identity, worker] : workers_) {
    if (now - worker.last_seen_us >= interval_us * options_.liveness) silent.push_back(identity);
  }
  for (const auto& identity : silent) {
    Expire(identity, absl::StrCat("silent for ", options_.liveness, " heartbeat intervals"));
  }
  // Our heartbeats.
  if (now - last_heartbeat_sent_us_ >= interval_us) {
    last_heartbeat_sent_us_ = now;
    std::vector<std::string> identities;
    for (const auto& [identity, worker] : workers_) identities.push_back(identity);
    for (const auto& identity : identities) {
      v1::Heartbeat hb;
      hb.set_sent_unix_ms(static_cast<uint64_t>(options_.clock->UnixMicros() / 1000));
      SendTo(identity, hb);
    }
  }
  // Deadlines.
  const uint64_t now_unix_ms = static_cast<uint64_t>(options_.clock->UnixMicros() / 1000);
  for (auto& [model, classes] : queues_) {
    for (auto& queue : classes) {
      for (auto q = queue.begin(); q != queue.end();) {
        uint64_t deadline = q->request.deadline_unix_ms();
        if (deadline != 0 && now_unix_ms >= deadline) {
          known_ids_.erase(q->request.request_id());
          Terminate(q->request.request_id(), 0, q->sink, v1::FINISH_ERROR,
                    ReasonError("deadline_exceeded", "the deadline passed while queued"));
          q = queue.erase(q);
        } else {
          ++q;
        }
      }
    }
  }
  std::vector<std::pair<std::string, std::string>> expired;  // identity, request id
  for (auto& [identity, worker] : workers_) {
    for (auto& [id, flight] : worker.in_flight) {
      uint64_t deadline = flight.pending.request.deadline_unix_ms();
      if (!flight.ending && deadline != 0 && now_unix_ms >= deadline) {
        BeginEnding(flight, v1::FINISH_ERROR,
                    ReasonError("deadline_exceeded", "the request's deadline passed"));
        expired.emplace_back(identity, id);
      }
    }
  }
  ExpireUnansweredCancels(now);
  for (const auto& [identity, id] : expired) {
    if (!workers_.count(identity)) continue;
    v1::Cancel cancel;
    cancel.set_request_id(id);
    cancel.set_reason("deadline_exceeded");
    SendTo(identity, cancel);
  }
}

void Broker::Impl::Dispatch() {
  for (auto& [model, classes] : queues_) {
    bool no_credit = false;
    for (auto& queue : classes) {
      while (!queue.empty() && !no_credit) {
        Worker* best = nullptr;
        for (auto& [identity, worker] : workers_) {
          if (worker.bundle.model() != model || worker.credit <= 0) continue;
          if (best == nullptr || worker.credit > best->credit ||
              (worker.credit == best->credit && worker.in_flight.size() < best->in_flight.size())) {
            best = &worker;
          }
        }
        if (best == nullptr) {
          no_credit = true;  // lower classes wait too: strict priority
          break;
        }
        Pending pending = std::move(queue.front());
        queue.pop_front();
        const std::string id = pending.request.request_id();
        // Built in its variant: one copy of the request (the pending one stays for a
        // re-queue), not a second one into a WorkerMessage.
        wire::WorkerMessage message{std::in_place_type<v1::Request>};
        *std::get<v1::Request>(message).mutable_request() = pending.request;
        InFlight flight;
        flight.pending = std::move(pending);
        best->in_flight.emplace(id, std::move(flight));
        --best->credit;
        owner_[id] = best->identity;
        ++stats_.dispatched;
        std::string identity = best->identity;
        std::vector<std::string> frames = wire::EncodeFrames(message);
        frames.insert(frames.begin(), identity);
        absl::Status sent = SendFrames(socket_, frames);
        if (!sent.ok()) {
          // Unroutable or full: nothing of the REQUEST left (a multipart message is
          // queued whole or not at all), so nothing reached the worker or the client.
          // It goes back to the head of its queue for another worker; this one expires
          // (failing its other requests), and with no worker left the queue fails
          // no_worker as usual.
          auto node = best->in_flight.extract(id);
          owner_.erase(id);
          --stats_.dispatched;
          queue.push_front(std::move(node.mapped().pending));
          Expire(identity, absl::StrCat("send failed: ", sent.message()));
        }
      }
    }
  }
}

absl::Status Broker::Impl::Submit(v1::InferenceRequest request, std::shared_ptr<StreamSink> sink) {
  Locked lock(this);
  const std::string& id = request.request_id();
  if (id.empty() || known_ids_.count(id)) {
    return ReasonError("invalid_request", "missing or duplicate request id");
  }
  if (!HasLiveWorker(request.model())) {
    ++stats_.rejected_no_worker;
    return WithRetryAfter(
        ReasonError("no_worker", absl::StrCat("no live worker serves '", request.model(), "'")),
        options_.retry_after_ms);
  }
  auto& classes = queues_[request.model()];
  size_t queued = 0;
  for (const auto& queue : classes) queued += queue.size();
  // Requests that free slots will take on the broker thread's next pass are not
  // waiting; the bound is on those that are.
  if (queued >= options_.max_queue_per_model + FreeSlots(request.model())) {
    ++stats_.rejected_queue_full;
    return WithRetryAfter(
        ReasonError("queue_full", absl::StrCat("the queue of '", request.model(), "' is full (",
                                               queued, " waiting)")),
        options_.retry_after_ms);
  }
  known_ids_.insert(id);
  int cls = ClassIndex(request.priority());
  const bool credit = FreeSlots(request.model()) > 0;
  classes[cls].push_back(Pending{std::move(request), std::move(sink)});
  // A worker has a free slot: send the REQUEST from this thread, without waking the
  // broker thread. Otherwise the request waits; the broker thread dispatches it when a
  // FINAL or HEARTBEAT gives credit back.
  if (credit) {
    Dispatch();
    if (SocketReadableLocked()) Wake();
  }
  return absl::OkStatus();
}

void Broker::Impl::Cancel(const std::string& request_id, const std::string& reason) {
  Locked lock(this);
  if (!known_ids_.count(request_id)) return;
  auto owner = owner_.find(request_id);
  if (owner == owner_.end()) {
    for (auto& [model, classes] : queues_) {
      for (auto& queue : classes) {
        for (auto q = queue.begin(); q != queue.end(); ++q) {
          if (q->request.request_id() != request_id) continue;
          Terminate(request_id, 0, q->sink, v1::FINISH_CANCELLED,
                    ReasonError("cancelled", reason));
          queue.erase(q);
          known_ids_.erase(request_id);
          return;
        }
      }
    }
    return;
  }
  auto worker = workers_.find(owner->second);
  if (worker == workers_.end()) return;
  auto flight = worker->second.in_flight.find(request_id);
  if (flight == worker->second.in_flight.end() || flight->second.ending) return;
  // The sink's Terminal comes with the worker's FINAL (its usage), or when the worker is
  // treated as lost for it.
  BeginEnding(flight->second, v1::FINISH_CANCELLED, ReasonError("cancelled", reason));
  // The CANCEL goes out on the broker thread (it owns the socket): queue it there.
  cancels_to_send_.push_back({owner->second, request_id, reason});
  Wake();
}

std::optional<v1::BundleIdentity> Broker::Impl::LiveBundle(const std::string& model) const {
  std::lock_guard<std::mutex> lock(bundles_mu_);
  auto it = bundles_.find(model);
  if (it == bundles_.end()) return std::nullopt;
  return it->second;
}

void Broker::Impl::RefreshBundles() {
  std::map<std::string, v1::BundleIdentity> bundles;
  for (const auto& [identity, worker] : workers_) bundles.emplace(worker.bundle.model(), worker.bundle);
  std::lock_guard<std::mutex> lock(bundles_mu_);
  bundles_.swap(bundles);
}

std::vector<std::string> Broker::Impl::LiveModels() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::set<std::string> models;
  for (const auto& [identity, worker] : workers_) models.insert(worker.bundle.model());
  return std::vector<std::string>(models.begin(), models.end());
}

uint32_t Broker::Impl::LiveWorkerCount(const std::string& model) const {
  std::lock_guard<std::mutex> lock(mu_);
  uint32_t n = 0;
  for (const auto& [identity, worker] : workers_) n += worker.bundle.model() == model ? 1 : 0;
  return n;
}

BrokerStats Broker::Impl::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  BrokerStats out = stats_;
  out.live_workers = workers_.size();
  out.queued = 0;
  for (const auto& [model, classes] : queues_) {
    for (const auto& queue : classes) out.queued += queue.size();
  }
  out.in_flight = owner_.size();
  if (auth_) {
    out.handshakes_admitted = auth_->admitted();
    out.handshakes_refused = auth_->refused();
  }
  return out;
}

Broker::Broker(std::unique_ptr<Impl> impl, std::string endpoint)
    : impl_(std::move(impl)), endpoint_(std::move(endpoint)) {}

Broker::~Broker() { impl_->Stop(); }

absl::StatusOr<std::unique_ptr<Broker>> Broker::Start(BrokerOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  auto endpoint = impl->Bind();
  if (!endpoint.ok()) return endpoint.status();
  Impl* raw = impl.get();
  std::unique_ptr<Broker> broker(new Broker(std::move(impl), *endpoint));
  raw->StartThread();
  return broker;
}

absl::Status Broker::Submit(v1::InferenceRequest request, std::shared_ptr<StreamSink> sink) {
  return impl_->Submit(std::move(request), std::move(sink));
}
void Broker::Cancel(const std::string& request_id, const std::string& reason) {
  impl_->Cancel(request_id, reason);
}
void Broker::Stop() { impl_->Stop(); }
std::optional<v1::BundleIdentity> Broker::LiveBundle(const std::string& model) const {
  return impl_->LiveBundle(model);
}
std::vector<std::string> Broker::LiveModels() const { return impl_->LiveModels(); }
uint32_t Broker::LiveWorkerCount(const std::string& model) const {
  return impl_->LiveWorkerCount(model);
}
BrokerStats Broker::stats() const { return impl_->stats(); }

}  // namespace gantry::broker
