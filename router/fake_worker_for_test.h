// TEST DOUBLE: a fake GNTW/1 worker for router tests. It is not the worker (worker/):
// it loads no model and generates nothing. It speaks the real protocol over a real
// DEALER socket with the real codec (proto/worker_frames.h): READY, HEARTBEATs every
// interval with free_slots and active_request_ids, and for each REQUEST it plays a
// script of text / reasoning / tool-call events and a FINAL. Faults are scripted too:
// die mid-stream (close the socket without a word, as a crashed process would), stall
// heartbeats (go silent), hang until cancelled. Usage as a worker reports it: each step
// counts its tokens (one by default; a tool call is many), every PARTIAL carries the
// running count, every FINAL (a cancelled one too) the prompt and the tokens so far; a
// CANCEL may be answered late, or never. A refused READY is visible as the DISCONNECT
// reasons it received (worker_not_allowed, worker_id_taken, protocol_error).
//
// Thread-safety: all public methods are thread-safe; the worker runs its own thread.
#ifndef GANTRY_ROUTER_FAKE_WORKER_FOR_TEST_H_
#define GANTRY_ROUTER_FAKE_WORKER_FOR_TEST_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gantry/v1/inference.pb.h"

namespace gantry::testing {

struct FakeStep {
  enum Kind { kText, kReasoning, kToolCall, kSleepMs, kFinish, kDie, kHangUntilCancel, kGate };
  Kind kind = kText;
  std::string text;       // kText / kReasoning; tool name for kToolCall
  std::string arguments;  // kToolCall
  int sleep_ms = 0;       // kSleepMs
  v1::FinishReason finish = v1::FINISH_STOP;  // kFinish
  uint32_t tokens = 1;    // kText / kReasoning / kToolCall: the tokens it counts as

  static FakeStep Text(std::string t) { return {kText, std::move(t)}; }
  static FakeStep Reasoning(std::string t) { return {kReasoning, std::move(t)}; }
  static FakeStep ToolCall(std::string name, std::string args) {
    return {kToolCall, std::move(name), std::move(args)};
  }
  static FakeStep Sleep(int ms) { FakeStep s; s.kind = kSleepMs; s.sleep_ms = ms; return s; }
  static FakeStep Finish(v1::FinishReason f) { FakeStep s; s.kind = kFinish; s.finish = f; return s; }
  static FakeStep Die() { FakeStep s; s.kind = kDie; return s; }
  static FakeStep Hang() { FakeStep s; s.kind = kHangUntilCancel; return s; }
  // Waits here until OpenGate() (then every request waiting here goes on).
  static FakeStep Gate() { FakeStep s; s.kind = kGate; return s; }
  // This step counted as `n` generated tokens.
  FakeStep Costing(uint32_t n) const { FakeStep s = *this; s.tokens = n; return s; }
};

struct FakeWorkerOptions {
  std::string endpoint;  // the router's ROUTER endpoint
  // READY's worker_id; empty: "fakehost/<pid>/fake<n>", unique in the process.
  std::string worker_id;
  std::string model = "test-model";
  std::string bundle_sha256 = std::string(64, 'b');  // READY's bundle.identity_sha256
  std::string tool_protocol = "hermes_json";
  uint32_t context_length = 4096;
  uint32_t default_max_tokens = 256;  // the bundle's output cap, as READY reports it
  uint32_t slots = 2;
  uint32_t heartbeat_interval_ms = 1000;
  // Played for every REQUEST. Default: "Hello" ", world" then FINISH_STOP.
  std::vector<FakeStep> script;
  uint32_t prompt_tokens = 10;  // reported in Terminal.usage
  // READY's KvCacheUse.type (a pool of 128 blocks of 1 MiB, a quarter in use).
  std::string kv_type = "f16";
  // How long the FINAL answering a CANCEL waits (the request stays active and listed in
  // HEARTBEATs meanwhile, as a worker finishing its decode step or prefill chunk);
  // negative: the CANCEL is never answered.
  int cancel_delay_ms = 0;
  // PARTIALs carry Partial.completion_tokens, the running count of tokens generated.
  bool report_running_count = true;
  // The DEALER's routing id; empty (as a real worker): the router assigns one per
  // connection. A rogue sets one to squat on another worker's.
  std::string routing_id;
  // False: never sends READY (a rogue that only sends HEARTBEATs on a squatted id).
  bool send_ready = true;
  // CURVE client keys (Z85) when the router runs CURVE; empty: plain.
  std::string curve_public_z85, curve_secret_z85, curve_server_public_z85;
};

class FakeWorkerForTest {
 public:
  explicit FakeWorkerForTest(FakeWorkerOptions options);
  // Stops the thread; sends DISCONNECT (unless killed or stalled) and nothing more.
  ~FakeWorkerForTest();

  void SetScript(std::vector<FakeStep> script);
  // Stops all sending (heartbeats included) while true; requests keep their place.
  void StallHeartbeats(bool stall);
  // Lets every request waiting at a Gate step (and every later one) go on.
  void OpenGate() { gate_open_ = true; }
  // Requests accepted and not yet finished (as the last HEARTBEAT would list them).
  int active_requests() const { return active_count_.load(); }
  // Closes the socket at once, like a crashed process.
  void Kill();
  bool dead() const { return dead_.load(); }

  // Counters and what the router sent.
  int requests_received() const;
  std::vector<std::string> cancels_received() const;
  // FINALs sent in answer to a CANCEL (counted before the send: while it reads 0, none
  // has left).
  int cancel_finals_sent() const { return cancel_finals_sent_.load(); }
  int router_heartbeats_received() const;
  int disconnects_received() const;
  // The reasons (Status.reason) of the first 64 DISCONNECTs received, in order.
  std::vector<std::string> disconnect_reasons() const;
  std::vector<v1::InferenceRequest> requests() const;

  // Waits until `predicate` holds (polled every 5 ms) or `timeout_ms` passes.
  bool WaitFor(const std::function<bool()>& predicate, int timeout_ms) const;

 private:
  void Run();

  const FakeWorkerOptions options_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> stall_{false};
  std::atomic<bool> kill_{false};
  std::atomic<bool> dead_{false};
  std::atomic<bool> gate_open_{false};
  std::atomic<int> active_count_{0};
  std::atomic<int> cancel_finals_sent_{0};
  mutable std::mutex mu_;
  std::vector<FakeStep> script_;
  int requests_received_ = 0;
  int heartbeats_received_ = 0;
  int disconnects_received_ = 0;
  std::vector<std::string> disconnect_reasons_;
  std::vector<std::string> cancels_;
  std::vector<v1::InferenceRequest> requests_;
  std::thread thread_;
};

}  // namespace gantry::testing

#endif  // GANTRY_ROUTER_FAKE_WORKER_FOR_TEST_H_
