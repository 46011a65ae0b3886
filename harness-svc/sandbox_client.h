// ToolExecutor over the sandbox service's ZeroMQ front (sandbox-svc/tool_service.h): a
// DEALER socket sends ["", serialized ToolCall] and waits for ["", ToolResult] with
// the same call id. After a timeout the socket is replaced, so that a late reply can
// never be taken for the answer to a later call.
//
// The service knows the caller by its connection, never by anything in the call: on
// its Unix socket (ipc://, the default) by this process's uid, over tcp by this
// client's CURVE key (then `curve` is required). Its principal for this uid or key is
// whose command grants decide; the ToolCall's grant.exec_rules is left empty.
//
// Thread-safety: one object per thread.
#ifndef GANTRY_HARNESS_SVC_SANDBOX_CLIENT_H_
#define GANTRY_HARNESS_SVC_SANDBOX_CLIENT_H_

#include <memory>
#include <string>

#include <zmq.hpp>

#include "absl/types/optional.h"
#include "common/curve_keys.h"
#include "common/handshake_monitor.h"
#include "harness-svc/agent_loop.h"

namespace gantry::harness {

inline constexpr char kDefaultSandboxEndpoint[] = "ipc:///run/gantry/sandbox.sock";

class SandboxClient : public ToolExecutor {
 public:
  // `endpoint`: "ipc:///run/gantry/sandbox.sock", or "tcp://HOST:PORT" with `curve`.
  explicit SandboxClient(std::string endpoint,
                         absl::optional<CurveClientKeys> curve = absl::nullopt);
  ~SandboxClient() override;
  // Errors: DEADLINE_EXCEEDED (no reply in time; with CURVE, when the handshake was
  // refused: PERMISSION_DENIED sandbox_peer_unknown), UNAVAILABLE, DATA_LOSS
  // ("protocol_error": a reply that is not the ToolResult of this call),
  // PERMISSION_DENIED when the service refused the caller or the task's workspace
  // (sandbox_peer_unknown, sandbox_principal_mismatch, sandbox_workspace_outside_roots,
  // sandbox_workspace_unsafe): no call of this task can run, so it is not an
  // observation for the model but the end of the task.
  absl::StatusOr<v1::ToolResult> Execute(const v1::ToolCall& call, int timeout_ms) override;

 private:
  void Reconnect();
  std::string endpoint_;
  absl::optional<CurveClientKeys> curve_;
  zmq::context_t context_;
  std::unique_ptr<HandshakeMonitor> monitor_;
  std::unique_ptr<zmq::socket_t> socket_;
};

// Whether the service refused the caller or its workspace (the reasons above).
bool IsServiceRefusal(const v1::ToolResult& result);

}  // namespace gantry::harness

#endif  // GANTRY_HARNESS_SVC_SANDBOX_CLIENT_H_
