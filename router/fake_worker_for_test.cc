#include "router/fake_worker_for_test.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <limits>
#include <map>
#include <zmq.hpp>

#include "common/curve_keys.h"
#include "common/error_codes.h"
#include "common/ids.h"
#include "common/status.h"
#include "common/zmq_io.h"
#include "gantry/v1/worker.pb.h"
#include "proto/worker_frames.h"

namespace gantry::testing {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Active {
  std::string id;
  size_t step = 0;
  uint64_t seq = 0;
  uint32_t calls = 0;
  uint32_t completion_tokens = 0;
  int64_t resume_at_ms = 0;
  bool hanging = false;
  // A CANCEL came: the FINAL (cancelled) goes at `final_at_ms`; nothing else is played.
  bool cancelled = false;
  int64_t final_at_ms = 0;
  std::string cancel_reason;
};

// An empty worker_id becomes one of its own, unique in the process: the broker refuses a
// second worker with a LIVE worker's id (worker_id_taken).
FakeWorkerOptions WithWorkerId(FakeWorkerOptions options) {
  static std::atomic<uint64_t> next{1};
  if (options.worker_id.empty()) {
    options.worker_id = "fakehost/" + std::to_string(getpid()) + "/fake" + std::to_string(next++);
  }
  return options;
}

}  // namespace

FakeWorkerForTest::FakeWorkerForTest(FakeWorkerOptions options)
    : options_(WithWorkerId(std::move(options))), script_(options_.script) {
  if (script_.empty()) {
    script_ = {FakeStep::Text("Hello"), FakeStep::Text(", world"),
               FakeStep::Finish(v1::FINISH_STOP)};
  }
  thread_ = std::thread([this] { Run(); });
}

FakeWorkerForTest::~FakeWorkerForTest() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void FakeWorkerForTest::SetScript(std::vector<FakeStep> script) {
  std::lock_guard<std::mutex> lock(mu_);
  script_ = std::move(script);
}
void FakeWorkerForTest::StallHeartbeats(bool stall) { stall_ = stall; }
void FakeWorkerForTest::Kill() { kill_ = true; }

int FakeWorkerForTest::requests_received() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_received_;
}
std::vector<std::string> FakeWorkerForTest::cancels_received() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancels_;
}
int FakeWorkerForTest::router_heartbeats_received() const {
  std::lock_guard<std::mutex> lock(mu_);
  return heartbeats_received_;
}
int FakeWorkerForTest::disconnects_received() const {
  std::lock_guard<std::mutex> lock(mu_);
  return disconnects_received_;
}
std::vector<std::string> FakeWorkerForTest::disconnect_reasons() const {
  std::lock_guard<std::mutex> lock(mu_);
  return disconnect_reasons_;
}
std::vector<v1::InferenceRequest> FakeWorkerForTest::requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

bool FakeWorkerForTest::WaitFor(const std::function<bool()>& predicate, int timeout_ms) const {
  int64_t until = NowMs() + timeout_ms;
  while (NowMs() < until) {
    if (predicate()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return predicate();
}

void FakeWorkerForTest::Run() {
  zmq::context_t context(1);
  zmq::socket_t socket(context, zmq::socket_type::dealer);
  socket.set(zmq::sockopt::linger, 0);
  // Never drop its own events under a burst (a thousand requests finishing at once):
  // a test double that loses a FINAL would make the router look wrong.
  socket.set(zmq::sockopt::sndhwm, 0);
  if (!options_.routing_id.empty()) socket.set(zmq::sockopt::routing_id, options_.routing_id);
  if (!options_.curve_secret_z85.empty()) {
    (void)ConfigureCurveClient(socket.handle(),
                               {options_.curve_public_z85, options_.curve_secret_z85,
                                options_.curve_server_public_z85});
  }
  socket.connect(options_.endpoint);

  v1::BundleIdentity bundle;
  bundle.set_model(options_.model);
  bundle.set_identity_sha256(options_.bundle_sha256);
  bundle.set_tool_protocol(options_.tool_protocol);
  bundle.set_context_length(options_.context_length);
  bundle.set_default_max_tokens(options_.default_max_tokens);

  std::map<std::string, Active> active;
  auto send = [&](const wire::WorkerMessage& m) {
    if (stall_) return;
    (void)SendFrames(socket, wire::EncodeFrames(m));
  };
  auto free_slots = [&] {
    return static_cast<uint32_t>(options_.slots > active.size() ? options_.slots - active.size() : 0);
  };
  auto final_event = [&](Active& a, v1::FinishReason finish, const absl::Status& status) {
    v1::Final f;
    f.set_request_id(a.id);
    v1::StreamEvent* e = f.mutable_terminal();
    e->set_request_id(a.id);
    e->set_seq(a.seq++);
    v1::Terminal* t = e->mutable_terminal();
    t->set_finish_reason(finish);
    ToProto(status, t->mutable_status());
    t->mutable_usage()->set_prompt_tokens(options_.prompt_tokens);
    t->mutable_usage()->set_completion_tokens(a.completion_tokens);
    *t->mutable_bundle() = bundle;
    send(f);
  };

  v1::Ready ready;
  ready.set_protocol_version(wire::kWorkerProtocolVersion);
  ready.set_worker_id(options_.worker_id);
  *ready.mutable_bundle() = bundle;
  ready.set_slots(options_.slots);
  ready.set_free_slots(options_.slots);
  ready.set_heartbeat_interval_ms(options_.heartbeat_interval_ms);
  // A pool of 128 blocks, a quarter in use (the figures /metrics tests read).
  ready.mutable_kv_cache()->set_block_tokens(32);
  ready.mutable_kv_cache()->set_blocks(128);
  ready.mutable_kv_cache()->set_blocks_in_use(32);
  ready.mutable_kv_cache()->set_bytes(uint64_t{128} << 20);
  ready.mutable_kv_cache()->set_type(options_.kv_type);
  if (options_.send_ready) send(ready);
  int64_t next_heartbeat = NowMs() + options_.heartbeat_interval_ms;

  while (!stop_) {
    if (kill_) break;
    // Everything that has arrived, then one pass over the requests: a burst of
    // requests is taken in at once, so the next HEARTBEAT lists all of them.
    for (int wait_ms = 5;; wait_ms = 0) {
      auto frames = RecvFrames(socket, wait_ms);
      if (!frames.ok()) break;
      auto message = wire::DecodeFrames(*frames, wire::Direction::kRouterToWorker);
      if (message.ok()) {
        if (auto* req = std::get_if<v1::Request>(&*message)) {
          {
            std::lock_guard<std::mutex> lock(mu_);
            ++requests_received_;
            requests_.push_back(req->request());
          }
          Active a;
          a.id = req->request().request_id();
          if (active.size() >= options_.slots) {
            final_event(a, v1::FINISH_ERROR, ReasonError("queue_full", "no free slot"));
          } else {
            active[a.id] = a;
          }
        } else if (auto* cancel = std::get_if<v1::Cancel>(&*message)) {
          {
            std::lock_guard<std::mutex> lock(mu_);
            cancels_.push_back(cancel->request_id());
          }
          auto it = active.find(cancel->request_id());
          if (it != active.end() && !it->second.cancelled) {
            Active& a = it->second;
            a.cancelled = true;
            a.cancel_reason = cancel->reason();
            a.final_at_ms = options_.cancel_delay_ms < 0
                                ? std::numeric_limits<int64_t>::max()
                                : NowMs() + options_.cancel_delay_ms;
          }
        } else if (std::holds_alternative<v1::Heartbeat>(*message)) {
          std::lock_guard<std::mutex> lock(mu_);
          ++heartbeats_received_;
        } else if (auto* disconnect = std::get_if<v1::Disconnect>(&*message)) {
          std::lock_guard<std::mutex> lock(mu_);
          ++disconnects_received_;
          if (disconnect_reasons_.size() < 64) {
            disconnect_reasons_.push_back(disconnect->reason().reason());
          }
        }
      }
    }
    // Advance every active request through its script.
    std::vector<FakeStep> script;
    {
      std::lock_guard<std::mutex> lock(mu_);
      script = script_;
    }
    bool died = false;
    for (auto it = active.begin(); it != active.end() && !died;) {
      Active& a = it->second;
      if (a.cancelled) {
        if (NowMs() < a.final_at_ms || stall_) {
          ++it;
          continue;
        }
        ++cancel_finals_sent_;
        final_event(a, v1::FINISH_CANCELLED, ReasonError("cancelled", a.cancel_reason));
        it = active.erase(it);
        continue;
      }
      bool finished = false;
      while (!a.hanging && a.resume_at_ms <= NowMs() && a.step < script.size() && !stall_) {
        const FakeStep& step = script[a.step++];
        if (step.kind == FakeStep::kSleepMs) {
          a.resume_at_ms = NowMs() + step.sleep_ms;
          break;
        }
        if (step.kind == FakeStep::kDie) {
          died = true;
          break;
        }
        if (step.kind == FakeStep::kHangUntilCancel) {
          a.hanging = true;
          break;
        }
        if (step.kind == FakeStep::kGate && !gate_open_) {
          --a.step;  // still waiting here
          break;
        }
        if (step.kind == FakeStep::kGate) continue;
        if (step.kind == FakeStep::kFinish) {
          final_event(a, step.finish, absl::OkStatus());
          finished = true;
          break;
        }
        v1::Partial p;
        p.set_request_id(a.id);
        v1::StreamEvent* e = p.add_events();
        e->set_request_id(a.id);
        e->set_seq(a.seq++);
        a.completion_tokens += step.tokens;
        if (options_.report_running_count) p.set_completion_tokens(a.completion_tokens);
        if (step.kind == FakeStep::kText) e->mutable_text()->set_text(step.text);
        if (step.kind == FakeStep::kReasoning) e->mutable_reasoning()->set_text(step.text);
        if (step.kind == FakeStep::kToolCall) {
          e->mutable_tool_call()->set_index(a.calls++);
          e->mutable_tool_call()->mutable_call()->set_id(NewId("call"));
          e->mutable_tool_call()->mutable_call()->set_name(step.text);
          e->mutable_tool_call()->mutable_call()->set_arguments_json(step.arguments);
        }
        send(p);
      }
      it = finished ? active.erase(it) : std::next(it);
    }
    if (died) break;
    active_count_ = static_cast<int>(active.size());
    if (NowMs() >= next_heartbeat) {
      next_heartbeat = NowMs() + options_.heartbeat_interval_ms;
      v1::Heartbeat hb;
      hb.set_free_slots(free_slots());
      for (const auto& [id, a] : active) hb.add_active_request_ids(id);
      send(hb);
    }
  }
  if (!kill_) {
    // Stopped (destroyed), as a worker that shuts down says it: the router expires this
    // registration at once rather than after `liveness` silent intervals (a worker that
    // replaces it has its own worker_id and does not displace it).
    v1::Disconnect bye;
    ToProto(absl::UnavailableError("fake worker stopping"), bye.mutable_reason());
    send(bye);
    socket.set(zmq::sockopt::linger, 200);
  }
  dead_ = true;
  socket.close();
}

}  // namespace gantry::testing
