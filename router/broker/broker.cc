#include "router/broker/broker.h"

#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <zmq.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/error_codes.h"
#include "common/log.h"
#include "common/sha256.h"
#include "common/status.h"
#include "common/zmq_io.h"
#include "router/broker/broker_impl.h"
#include "router/broker/worker_entry_state.h"

namespace gantry::broker {

namespace internal {

std::string Printable(const std::string& identity) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : identity) {
    out.push_back(hex[c >> 4]);
    out.push_back(hex[c & 15]);
  }
  return out;
}

}  // namespace internal

using internal::kPriorityClasses;
using internal::Printable;

namespace {

// A conversation: its model, principal, and the client's prompt_cache_key or else its
// first two messages (SHA-256, so that the key's size does not grow with the prompt).
std::string ConversationKey(const v1::InferenceRequest& request) {
  Sha256 h;
  auto add = [&h](const std::string& part) {  // length-prefixed: no two lists hash alike
    h.Update(std::to_string(part.size()));
    h.Update(":");
    h.Update(part);
  };
  add(request.model());
  add(request.principal());
  if (!request.prompt_cache_key().empty()) {
    add("prompt_cache_key");
    add(request.prompt_cache_key());
    return h.HexDigest();
  }
  add("messages");
  for (int i = 0; i < std::min(2, request.messages_size()); ++i) {
    add(request.messages(i).role());
    add(request.messages(i).content());
  }
  return h.HexDigest();
}


// Serving order of the priority classes: accessibility, interactive, batch.
int ClassIndex(v1::PriorityClass priority) {
  switch (priority) {
    case v1::PRIORITY_ACCESSIBILITY: return 0;
    case v1::PRIORITY_BATCH: return 2;
    default: return 1;
  }
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


}  // namespace


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
  if (!status.ok()) {
    Lose(identity, WorkerInput::kSendFailed, absl::StrCat("send failed: ", status.message()));
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
  const WorkerEntryState state = it != workers_.end() ? WorkerEntryState::kLive
                                                      : WorkerEntryState::kUnknown;
  // Classify what arrived, then do what the table says (worker_entry_state.h).
  auto decoded = wire::DecodeFrames(frames, wire::Direction::kWorkerToRouter);
  WorkerInput input = WorkerInput::kMalformed;
  ReadyVerdict verdict;
  const v1::Ready* ready = nullptr;
  if (decoded.ok()) {
    wire::WorkerMessage& message = *decoded;
    if ((ready = std::get_if<v1::Ready>(&message)) != nullptr) {
      verdict = ClassifyReady(*ready, user_id);
      input = verdict.input;
    } else if (state == WorkerEntryState::kLive && user_id != it->second.user_id) {
      input = WorkerInput::kUnderAnotherKey;
    } else if (std::holds_alternative<v1::Heartbeat>(message)) {
      input = WorkerInput::kHeartbeat;
    } else if (std::holds_alternative<v1::Disconnect>(message)) {
      input = WorkerInput::kDisconnect;
    } else {
      input = WorkerInput::kPartialOrFinal;  // the only other worker-to-router commands
    }
  }
  const WorkerStep step = NextWorkerStep(state, input);
  switch (step.action) {
    case WorkerAction::kRegister:
      Register(identity, *ready, user_id);
      return;
    case WorkerAction::kRefuseReady:
      RefuseReady(identity, *ready, user_id, verdict.code, verdict.why);
      return;
    case WorkerAction::kDisconnect: {
      ++stats_.dropped_frames;
      if (!decoded.ok()) {
        Log(LogLevel::kWarning, "broker.unknown_peer_rejected",
            {{"identity", Printable(identity)}, {"state", "UNKNOWN"},
             {"why", std::string(decoded.status().message())}});
        SendDisconnect(identity, decoded.status().message());
        return;
      }
      int64_t count = 0;
      if (ThrottledLog(absl::StrCat("unknown|", user_id), &count)) {
        Log(LogLevel::kInfo, "broker.unknown_peer_rejected",
            {{"identity", Printable(identity)}, {"state", "UNKNOWN"},
             {"key_fingerprint", user_id.empty() ? "none" : user_id},
             {"command", wire::CommandName(wire::CommandOf(*decoded))},
             {"messages", absl::StrCat(count)}});
      }
      SendDisconnect(identity, "not registered: send READY first");
      return;
    }
    case WorkerAction::kIgnore:
      return;
    case WorkerAction::kDrop:
      DropFrame("broker.frame_dropped", identity, decoded.status().message());
      return;
    case WorkerAction::kHandle: {
      Worker& worker = it->second;
      worker.last_seen_us = options_.clock->MonotonicMicros();
      if (auto* hb = std::get_if<v1::Heartbeat>(&*decoded)) {
        OnHeartbeat(worker, *hb);
      } else if (auto* partial = std::get_if<v1::Partial>(&*decoded)) {
        OnPartial(worker, *partial);
      } else if (auto* final_message = std::get_if<v1::Final>(&*decoded)) {
        OnFinal(worker, *final_message);
      }
      return;
    }
    case WorkerAction::kExpire:
      Expire(identity, "DISCONNECT received");
      return;
    case WorkerAction::kExpireDisconnect:
      Log(LogLevel::kWarning, "broker.ready_again",
          {{"identity", Printable(identity)}, {"state", "LIVE"}, {"next", "EXPIRED"}});
      Expire(identity, "READY from a LIVE worker");
      SendDisconnect(identity, "READY received from a LIVE worker");
      return;
    case WorkerAction::kExpireRefuse: {
      // A peer may choose its routing id: once the connection that sent READY is gone,
      // another may take the same id. Under another key it is not this worker: nothing
      // it says is believed, and nothing more is sent to this identity (found by a red
      // team: an allowed key for another model squatted a dead worker's id, received
      // its prompts and answered them).
      const Worker& worker = it->second;
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
  }
}

void Broker::Impl::Lose(const std::string& identity, WorkerInput why_input, absl::string_view why) {
  if (!workers_.count(identity)) return;
  if (NextWorkerStep(WorkerEntryState::kLive, why_input).action == WorkerAction::kExpire) {
    Expire(identity, why);
  }
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
  // Refused before anything reached the client, for lack of a slot or because the
  // worker is draining (docs/protocol.md, "Worker states"): queue it again for another.
  if (!flight.ending && flight.relayed == 0 && terminal.finish_reason() == v1::FINISH_ERROR &&
      (terminal.status().reason() == "queue_full" || terminal.status().reason() == "no_worker")) {
    worker.credit = 0;  // it told us it is full, or takes no more
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
    Lose(identity, WorkerInput::kSilent,
         absl::StrCat("silent for ", options_.liveness, " heartbeat intervals"));
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

Broker::Impl::Worker* Broker::Impl::PickWorker(const std::string& model, const std::string& conversation) {
  auto last = conversation_worker_.find(conversation);
  if (last != conversation_worker_.end()) {
    auto worker = workers_.find(last->second.identity);
    if (worker != workers_.end() && worker->second.bundle.model() == model && worker->second.credit > 0) {
      ++stats_.dispatched_by_prefix;
      return &worker->second;
    }
  }
  Worker* best = nullptr;
  for (auto& [identity, worker] : workers_) {
    if (worker.bundle.model() != model || worker.credit <= 0) continue;
    if (best == nullptr || worker.credit > best->credit ||
        (worker.credit == best->credit && worker.in_flight.size() < best->in_flight.size())) {
      best = &worker;
    }
  }
  return best;
}

void Broker::Impl::Remember(const std::string& conversation, const std::string& identity) {
  auto it = conversation_worker_.find(conversation);
  if (it != conversation_worker_.end()) {
    it->second.identity = identity;
    conversation_order_.splice(conversation_order_.end(), conversation_order_, it->second.order);
    return;
  }
  conversation_order_.push_back(conversation);
  conversation_worker_.emplace(conversation, ConversationEntry{identity, std::prev(conversation_order_.end())});
  if (conversation_order_.size() > kMaxConversations) {
    conversation_worker_.erase(conversation_order_.front());
    conversation_order_.pop_front();
  }
}

void Broker::Impl::Dispatch() {
  for (auto& [model, classes] : queues_) {
    bool no_credit = false;
    for (auto& queue : classes) {
      while (!queue.empty() && !no_credit) {
        const std::string conversation = queue.front().conversation;
        Worker* best = PickWorker(model, conversation);
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
        Remember(conversation, best->identity);
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
          Lose(identity, WorkerInput::kSendFailed, absl::StrCat("send failed: ", sent.message()));
        }
      }
    }
  }
}

absl::Status Broker::Impl::Submit(v1::InferenceRequest request, std::shared_ptr<StreamSink> sink) {
  // Hashed before the lock: the messages may be long.
  std::string conversation = ConversationKey(request);
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
  classes[cls].push_back(Pending{std::move(request), std::move(sink), std::move(conversation)});
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
std::vector<WorkerKv> Broker::WorkerKvUse() const { return impl_->WorkerKvUse(); }
BrokerStats Broker::stats() const { return impl_->stats(); }

}  // namespace gantry::broker
