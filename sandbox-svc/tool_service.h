// gantry-sandbox's ZeroMQ front: a ROUTER socket that takes serialized ToolCalls and
// answers serialized ToolResults (docs/protocol.md, "Tool events").
//
// Frames, as the ROUTER sees them: [identity, "", body] from a REQ client, or
// [identity, body] from a DEALER that sends no delimiter; the reply mirrors the
// envelope. A message of any other shape, or over 64 MiB, is dropped and counted (no
// identity can be trusted to answer). A body that is not a ToolCall is answered with a
// ToolResult TOOL_ERROR (reason "protocol_error") and counted. When the bounded queue
// is full the call is answered TOOL_ERROR with reason "queue_full" at once.
//
// Structure: one I/O thread owns the ROUTER socket; a fixed pool of workers runs
// Sandbox::Run and hands replies back over an inproc PUSH/PULL pair (ZeroMQ sockets are
// not shared between threads).
//
// Thread-safety: Start/Stop from one thread; stats() from any thread.
#ifndef GANTRY_SANDBOX_SVC_TOOL_SERVICE_H_
#define GANTRY_SANDBOX_SVC_TOOL_SERVICE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "absl/status/status.h"
#include "sandbox-svc/sandbox.h"

namespace gantry::sandbox {

struct ToolServiceOptions {
  // e.g. "tcp://127.0.0.1:5570", "tcp://127.0.0.1:*", "ipc:///run/gantry/sandbox".
  std::string endpoint = "tcp://127.0.0.1:5570";
  size_t workers = 4;
  size_t queue_capacity = 64;
};

struct ToolServiceStats {
  uint64_t received = 0;
  uint64_t replied = 0;
  uint64_t dropped_malformed = 0;    // wrong envelope or oversized: no reply
  uint64_t answered_malformed = 0;   // body not a ToolCall: TOOL_ERROR reply
  uint64_t rejected_queue_full = 0;
};

class ToolService {
 public:
  // `sandbox` must outlive the service.
  ToolService(const Sandbox& sandbox, ToolServiceOptions options);
  ~ToolService();  // Stop()s

  // Binds and starts the threads. Errors: UNAVAILABLE when the endpoint cannot be bound.
  absl::Status Start();
  // The endpoint actually bound (after Start), e.g. "tcp://127.0.0.1:40123".
  std::string endpoint() const { return bound_; }
  // Stops accepting, finishes running calls, joins the threads. Idempotent.
  void Stop();
  ToolServiceStats stats() const;

 private:
  struct Job {
    std::vector<std::string> envelope;  // identity (+ "" delimiter)
    std::string body;
  };
  void IoLoop();
  void WorkerLoop();

  const Sandbox& sandbox_;
  ToolServiceOptions options_;
  zmq::context_t context_;
  std::unique_ptr<zmq::socket_t> router_;
  std::string bound_;
  std::string inproc_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> active_workers_{0};
  std::thread io_;
  std::vector<std::thread> workers_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  ToolServiceStats stats_;
};

}  // namespace gantry::sandbox

#endif  // GANTRY_SANDBOX_SVC_TOOL_SERVICE_H_
