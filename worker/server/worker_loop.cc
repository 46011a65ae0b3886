#include "worker/server/worker_loop.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <zmq.hpp>

#include "absl/strings/str_cat.h"
#include "common/error_codes.h"
#include "common/handshake_monitor.h"
#include "common/ids.h"
#include "common/log.h"
#include "common/status.h"
#include "common/zmq_io.h"
#include "proto/worker_frames.h"
#include "worker/server/worker_state.h"

namespace gantry::server {
namespace {

using Clock = std::chrono::steady_clock;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch()).count();
}

struct Job {
  v1::InferenceRequest request;
  std::atomic<bool> cancel{false};
};

// Scheduler -> socket thread over inproc: one byte, 'P' (a PARTIAL body follows) or 'F' (a
// FINAL body follows), then the serialized message.
constexpr char kOutboxPartial = 'P';
constexpr char kOutboxFinal = 'F';

}  // namespace

struct WorkerLoop::Impl {
  zmq::context_t context;
  std::string outbox;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::shared_ptr<Job>> pending;
  std::map<std::string, std::shared_ptr<Job>> active;  // queued or running, by request id
  bool shutting_down = false;
  // Used by the scheduler thread only, but for kv_status() (any thread).
  std::unique_ptr<Engine> engine;
  std::thread scheduler;
};

namespace {

v1::KvCacheUse KvCacheUse(const Engine& engine) {
  const Engine::KvStatus kv = engine.kv_status();
  v1::KvCacheUse use;
  use.set_block_tokens(static_cast<uint32_t>(kv.block_tokens));
  use.set_blocks(static_cast<uint32_t>(kv.blocks));
  use.set_blocks_in_use(static_cast<uint32_t>(kv.in_use));
  use.set_blocks_cached(static_cast<uint32_t>(kv.cached));
  use.set_bytes(kv.bytes);
  use.set_preemptions(static_cast<uint64_t>(kv.preemptions));
  use.set_type(model::KvTypeName(kv.type));
  return use;
}

}  // namespace

WorkerLoop::WorkerLoop(WorkerOptions options, const ServingBundle& bundle)
    : options_(std::move(options)), bundle_(bundle), impl_(new Impl) {
  if (options_.worker_id.empty()) {
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    options_.worker_id = absl::StrCat(host, "/", getpid(), "/", NewId("w").substr(2, 8));
  }
  impl_->outbox = absl::StrCat("inproc://gantry-worker-outbox-", reinterpret_cast<uintptr_t>(this));
}

WorkerLoop::~WorkerLoop() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->shutting_down = true;
    for (auto& [id, job] : impl_->active) job->cancel = true;
  }
  impl_->cv.notify_all();
  if (impl_->scheduler.joinable()) impl_->scheduler.join();
}

void WorkerLoop::Run() {
  Impl& m = *impl_;
  zmq::socket_t pull(m.context, zmq::socket_type::pull);
  pull.bind(m.outbox);
  // The scheduler: one thread owns the Engine (every slot's KV cache, one forward pass
  // per step for all requests in flight) and a PUSH socket. Requests join between steps.
  m.engine = std::make_unique<Engine>(bundle_, options_.capacity_per_slot, options_.slots, options_.threads,
                                      options_.kv_bytes, options_.kv_type);
  m.scheduler = std::thread([this, &m] {
    zmq::socket_t push(m.context, zmq::socket_type::push);
    push.set(zmq::sockopt::linger, 1000);
    push.connect(m.outbox);
    Engine& engine = *m.engine;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(m.mu);
        m.cv.wait(lock, [&] { return m.shutting_down || !m.pending.empty() || engine.active() > 0; });
        if (m.shutting_down && m.pending.empty() && engine.active() == 0) return;
        while (!m.pending.empty()) {
          std::shared_ptr<Job> job = m.pending.front();
          m.pending.pop_front();
          Log(LogLevel::kDebug, "worker.request.start", {{"request_id", job->request.request_id()}});
          // The closure holds the job (and its cancel flag) until the request ends.
          engine.Add(job->request, &job->cancel, [job, &push](v1::StreamEvent e, uint32_t completion_tokens) {
            // Each event travels as its own PARTIAL (with the running count of tokens
            // generated, what the router charges if this worker is lost) or as the FINAL.
            std::string bytes;
            if (e.has_terminal()) {
              v1::Final final_message;
              final_message.set_request_id(e.request_id());
              *final_message.mutable_terminal() = std::move(e);
              bytes = kOutboxFinal + final_message.SerializeAsString();
            } else {
              v1::Partial partial;
              partial.set_request_id(e.request_id());
              *partial.add_events() = std::move(e);
              partial.set_completion_tokens(completion_tokens);
              bytes = kOutboxPartial + partial.SerializeAsString();
            }
            for (;;) {
              try {
                push.send(zmq::buffer(bytes), zmq::send_flags::none);
                break;
              } catch (const zmq::error_t& err) {
                if (err.num() != EINTR) break;  // the context is closing: nobody to tell
              }
            }
          });
        }
      }
      engine.Step();
    }
  });

  // The state machine of worker_state.h: every event goes through NextWorkerState, and
  // every change of state is logged under the spec's names.
  WorkerState state = WorkerState::kConnecting;
  auto in_flight = [&] {
    std::lock_guard<std::mutex> lock(m.mu);
    return static_cast<int>(m.active.size());
  };
  auto on = [&](WorkerEvent event, absl::string_view why = "") {
    const WorkerState next = NextWorkerState(state, event, in_flight());
    if (next == state) return;
    // IDLE <-> SERVING changes with every request: debug; the others: info or warning.
    const bool busy_change = (state == WorkerState::kIdle || state == WorkerState::kServing) &&
                             (next == WorkerState::kIdle || next == WorkerState::kServing);
    Log(busy_change                        ? LogLevel::kDebug
        : next == WorkerState::kConnecting ? LogLevel::kWarning
                                           : LogLevel::kInfo,
        "worker.state",
        {{"state", std::string(WorkerStateName(next))},
         {"from", std::string(WorkerStateName(state))},
         {"on", std::string(WorkerEventName(event))},
         {"why", std::string(why)},
         {"worker_id", options_.worker_id}});
    state = next;
  };
  auto free_slots = [&] {
    if (state == WorkerState::kDraining) return 0u;  // the router sends no more
    return static_cast<uint32_t>(std::max(0, options_.slots - in_flight()));
  };
  auto make_ready = [&] {
    v1::Ready ready;
    ready.set_protocol_version(wire::kWorkerProtocolVersion);
    ready.set_worker_id(options_.worker_id);
    *ready.mutable_bundle() = bundle_.identity;
    ready.set_slots(static_cast<uint32_t>(options_.slots));
    ready.set_free_slots(free_slots());
    ready.set_heartbeat_interval_ms(static_cast<uint32_t>(options_.heartbeat_interval_ms));
    *ready.mutable_kv_cache() = KvCacheUse(*m.engine);
    return ready;
  };
  // Requests of a connection that was given up: cancelled, their events dropped (the
  // router has failed them already), their slots free again once they stop.
  std::set<std::string> abandoned;
  auto abandon_in_flight = [&] {
    std::lock_guard<std::mutex> lock(m.mu);
    for (auto& [id, job] : m.active) {
      job->cancel = true;
      abandoned.insert(id);
    }
    m.active.clear();
  };

  // READYs the router answered with DISCONNECT before anything else, in a row: such a
  // worker (refused: worker_not_allowed, worker_id_taken, ...) waits before it tries
  // again, one interval doubling up to kMaxRefusedBackoffMs, instead of spinning.
  int refused_in_a_row = 0;
  constexpr int64_t kMaxRefusedBackoffMs = 30000;
  const int64_t interval_ms = options_.heartbeat_interval_ms;
  Log(LogLevel::kInfo, "worker.state",
      {{"state", "CONNECTING"}, {"router", options_.router_endpoint},
       {"worker_id", options_.worker_id}});
  while (state != WorkerState::kGone) {
    // CONNECTING.
    if (refused_in_a_row > 0) {
      const int64_t wait_ms = std::min<int64_t>(
          kMaxRefusedBackoffMs, interval_ms << std::min(refused_in_a_row - 1, 5));
      const int64_t until = NowMs() + wait_ms;
      while (!stop_.load() && NowMs() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    if (stop_.load()) {
      on(WorkerEvent::kShutdownRequested, "stopped while not connected");
      break;
    }
    bool heard_other = false;  // a message other than DISCONNECT on this socket
    zmq::socket_t dealer(m.context, zmq::socket_type::dealer);
    dealer.set(zmq::sockopt::linger, 0);
    // Events are never dropped at a high-water mark (a dropped PARTIAL or FINAL would
    // fail the request at the router): the queue is bounded in time instead, because a
    // router silent for `liveness` heartbeat intervals makes this loop reconnect, which
    // discards it.
    dealer.set(zmq::sockopt::sndhwm, 0);
    // A fresh random routing id for each connection: no other connection can foresee
    // and take it, and the router never has to number this one itself
    // (docs/protocol.md, "Worker identity").
    dealer.set(zmq::sockopt::routing_id, NewId("w"));
    if (options_.curve) {
      absl::Status curve = ConfigureCurveClient(dealer.handle(), *options_.curve);
      if (!curve.ok()) {
        Log(LogLevel::kError, "worker.curve.failed", {{"error", curve.ToString()}});
        on(WorkerEvent::kShutdownRequested, "CURVE keys unusable");
        break;
      }
    }
    // With CURVE, a refusal by the router's ZAP handler is logged here too.
    std::unique_ptr<HandshakeMonitor> monitor;
    if (options_.curve) {
      auto attached = HandshakeMonitor::Attach(m.context, dealer, options_.router_endpoint);
      if (attached.ok()) monitor = std::move(*attached);
    }
    dealer.connect(options_.router_endpoint);
    (void)SendFrames(dealer, wire::EncodeFrames(make_ready()));
    on(WorkerEvent::kReadySent);
    int64_t last_heard = NowMs();
    int64_t last_sent = NowMs();
    int64_t drain_deadline = 0;  // DRAINING: when what is left in flight is cancelled
    int64_t drain_grace = 0;     // and when the DISCONNECT goes out whatever is left
    bool drained = false;        // DRAINING ended here: DISCONNECT tells the router
    auto send_heartbeat = [&](int64_t now) {
      v1::Heartbeat hb;
      hb.set_free_slots(free_slots());
      {
        std::lock_guard<std::mutex> lock(m.mu);
        for (const auto& [id, job] : m.active) hb.add_active_request_ids(id);
      }
      hb.set_sent_unix_ms(static_cast<uint64_t>(now));
      *hb.mutable_kv_cache() = KvCacheUse(*m.engine);
      (void)SendFrames(dealer, wire::EncodeFrames(hb));
      last_sent = now;
    };
    auto refuse = [&](const std::string& id, const absl::Status& why) {
      v1::Final final;
      final.set_request_id(id);
      v1::StreamEvent* e = final.mutable_terminal();
      e->set_request_id(id);
      e->mutable_terminal()->set_finish_reason(v1::FINISH_ERROR);
      ToProto(why, e->mutable_terminal()->mutable_status());
      *e->mutable_terminal()->mutable_bundle() = bundle_.identity;
      (void)SendFrames(dealer, wire::EncodeFrames(final));
    };
    // IDLE, SERVING, DRAINING: connected.
    while (state == WorkerState::kIdle || state == WorkerState::kServing ||
           state == WorkerState::kDraining) {
      if (stop_.load() && state != WorkerState::kDraining) {
        on(WorkerEvent::kShutdownRequested);
        drain_deadline = NowMs() + options_.drain_timeout_ms;
        send_heartbeat(NowMs());  // 0 free slots: the router sends no more
      }
      zmq::pollitem_t items[] = {{dealer.handle(), 0, ZMQ_POLLIN, 0},
                                 {pull.handle(), 0, ZMQ_POLLIN, 0},
                                 {monitor ? monitor->socket().handle() : nullptr, -1, ZMQ_POLLIN, 0}};
      try {
        zmq::poll(items, monitor ? 3 : 2, std::chrono::milliseconds(100));
      } catch (const zmq::error_t& e) {
        if (e.num() == EINTR) continue;  // a signal (Stop() is checked by the loop)
        Log(LogLevel::kError, "worker.poll.failed", {{"error", e.what()}});
        abandon_in_flight();
        on(WorkerEvent::kRouterLost, "poll failed");
        continue;
      }
      // Events from the scheduler: PARTIAL per event, FINAL for the terminal one.
      if (monitor && (items[2].revents & ZMQ_POLLIN)) monitor->Drain();
      if (items[1].revents & ZMQ_POLLIN) {
        for (;;) {
          zmq::message_t msg;
          try {
            if (!pull.recv(msg, zmq::recv_flags::dontwait)) break;
          } catch (const zmq::error_t&) {
            break;  // EINTR: the next poll picks the message up
          }
          if (msg.size() < 1) continue;
          const char* body = static_cast<const char*>(msg.data()) + 1;
          const int body_size = static_cast<int>(msg.size() - 1);
          if (*static_cast<const char*>(msg.data()) == kOutboxFinal) {
            v1::Final final;
            if (!final.ParseFromArray(body, body_size)) continue;
            if (abandoned.erase(final.request_id()) > 0) continue;
            {
              std::lock_guard<std::mutex> lock(m.mu);
              m.active.erase(final.request_id());
            }
            (void)SendFrames(dealer, wire::EncodeFrames(final));
            on(WorkerEvent::kRequestEnded);
          } else {
            v1::Partial partial;
            if (!partial.ParseFromArray(body, body_size)) continue;
            if (abandoned.count(partial.request_id()) > 0) continue;
            (void)SendFrames(dealer, wire::EncodeFrames(partial));
          }
          last_sent = NowMs();
        }
      }
      if (items[0].revents & ZMQ_POLLIN) {
        auto frames = RecvFrames(dealer, 0);
        if (frames.ok()) {
          last_heard = NowMs();
          auto message = wire::DecodeFrames(*frames, wire::Direction::kRouterToWorker);
          if (message.ok() && !std::holds_alternative<v1::Disconnect>(*message)) {
            heard_other = true;
            refused_in_a_row = 0;
          }
          if (!message.ok()) {
            Log(LogLevel::kWarning, "worker.frame.dropped", {{"error", message.status().ToString()}});
          } else if (auto* request = std::get_if<v1::Request>(&*message)) {
            auto job = std::make_shared<Job>();
            job->request = request->request();
            const std::string id = job->request.request_id();
            absl::Status admitted = AdmitRequest(state, static_cast<int>(free_slots()));
            if (admitted.ok()) {
              std::lock_guard<std::mutex> lock(m.mu);
              if (m.active.count(id) > 0) {
                admitted = ReasonError("queue_full", "a request with this id is in flight");
              } else {
                m.active[id] = job;
                m.pending.push_back(job);
              }
            }
            if (admitted.ok()) {
              m.cv.notify_one();
              on(WorkerEvent::kRequestAccepted);
            } else {
              refuse(id, admitted);  // more than our credit, a duplicate id, or draining
            }
          } else if (auto* cancel = std::get_if<v1::Cancel>(&*message)) {
            std::lock_guard<std::mutex> lock(m.mu);
            auto it = m.active.find(cancel->request_id());
            if (it != m.active.end()) it->second->cancel = true;  // unknown ids are ignored
          } else if (auto* disconnect = std::get_if<v1::Disconnect>(&*message)) {
            // The router's reason, e.g. worker_not_allowed: the allow-list does not let
            // this key serve this bundle (docs/protocol.md, "Worker identity").
            refused_in_a_row = heard_other ? 0 : refused_in_a_row + 1;
            Log(LogLevel::kWarning, "worker.disconnected",
                {{"code", disconnect->reason().reason().substr(0, 64)},
                 {"message", disconnect->reason().message().substr(0, 512)},
                 {"refused_in_a_row", absl::StrCat(refused_in_a_row)}});
            abandon_in_flight();
            on(WorkerEvent::kRouterLost, "DISCONNECT");
            continue;
          }
          // HEARTBEAT: being heard is all it means.
        }
      }
      const int64_t now = NowMs();
      if (now - last_sent >= interval_ms) send_heartbeat(now);
      if (now - last_heard > static_cast<int64_t>(options_.liveness) * interval_ms) {
        abandon_in_flight();
        on(WorkerEvent::kRouterLost, "router silent");
        continue;
      }
      if (state == WorkerState::kDraining) {
        if (in_flight() == 0) {
          drained = true;
          on(WorkerEvent::kDrained, "nothing in flight");
        } else if (drain_grace == 0 && now >= drain_deadline) {
          // The deadline: what is left is cancelled (each sends its FINAL within a
          // decode step), and a little later the DISCONNECT goes out regardless.
          std::lock_guard<std::mutex> lock(m.mu);
          for (auto& [id, job] : m.active) job->cancel = true;
          drain_grace = now + 2 * interval_ms;
        } else if (drain_grace != 0 && now >= drain_grace) {
          drained = true;
          on(WorkerEvent::kDrained, "drain deadline");
        }
      }
    }
    if (drained) {
      v1::Disconnect bye;
      ToProto(ReasonError("no_worker", "the worker stopped"), bye.mutable_reason());
      (void)SendFrames(dealer, wire::EncodeFrames(bye));
    }
  }
}

}  // namespace gantry::server
