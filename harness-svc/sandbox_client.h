// ToolExecutor over the sandbox service's ZeroMQ front (sandbox-svc/tool_service.h): a
// DEALER socket sends ["", serialized ToolCall] and waits for ["", ToolResult] with
// the same call id. After a timeout the socket is replaced, so that a late reply can
// never be taken for the answer to a later call.
//
// Thread-safety: one object per thread.
#ifndef GANTRY_HARNESS_SVC_SANDBOX_CLIENT_H_
#define GANTRY_HARNESS_SVC_SANDBOX_CLIENT_H_

#include <memory>
#include <string>

#include <zmq.hpp>

#include "harness-svc/agent_loop.h"

namespace gantry::harness {

class SandboxClient : public ToolExecutor {
 public:
  // `endpoint`: "tcp://127.0.0.1:5570".
  explicit SandboxClient(std::string endpoint);
  ~SandboxClient() override;
  // Errors: DEADLINE_EXCEEDED (no reply in time), UNAVAILABLE, DATA_LOSS
  // ("protocol_error": a reply that is not the ToolResult of this call).
  absl::StatusOr<v1::ToolResult> Execute(const v1::ToolCall& call, int timeout_ms) override;

 private:
  void Reconnect();
  std::string endpoint_;
  zmq::context_t context_;
  std::unique_ptr<zmq::socket_t> socket_;
};

}  // namespace gantry::harness

#endif  // GANTRY_HARNESS_SVC_SANDBOX_CLIENT_H_
