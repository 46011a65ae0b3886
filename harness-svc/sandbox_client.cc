#include "harness-svc/sandbox_client.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/error_codes.h"
#include "common/status.h"
#include "common/zmq_io.h"

namespace gantry::harness {

bool IsServiceRefusal(const v1::ToolResult& result) {
  if (result.outcome() != v1::TOOL_ERROR) return false;
  const std::string& reason = result.error().reason();
  return reason == "sandbox_peer_unknown" || reason == "sandbox_principal_mismatch" ||
         reason == "sandbox_workspace_outside_roots" || reason == "sandbox_workspace_unsafe";
}

SandboxClient::SandboxClient(std::string endpoint, absl::optional<CurveClientKeys> curve)
    : endpoint_(std::move(endpoint)), curve_(std::move(curve)), context_(1) {
  Reconnect();
}

SandboxClient::~SandboxClient() {
  monitor_.reset();
  socket_.reset();
  context_.close();
}

void SandboxClient::Reconnect() {
  monitor_.reset();
  socket_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::dealer);
  socket_->set(zmq::sockopt::linger, 0);
  if (curve_) {
    // A key that does not decode leaves the socket without CURVE: the server refuses it.
    (void)ConfigureCurveClient(socket_->handle(), *curve_);
    auto monitor = HandshakeMonitor::Attach(context_, *socket_, endpoint_);
    if (monitor.ok()) monitor_ = *std::move(monitor);
  }
  socket_->connect(endpoint_);
}

absl::StatusOr<v1::ToolResult> SandboxClient::Execute(const v1::ToolCall& call, int timeout_ms) {
  std::string body;
  if (!call.SerializeToString(&body)) {
    return Error(absl::StatusCode::kInternal, "internal", "cannot serialize the ToolCall");
  }
  try {
    // A DEALER queues the message until the connection is up; the receive deadline
    // covers both the connection and the run.
    GANTRY_RETURN_IF_ERROR(SendFrames(*socket_, {"", body}));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now())
                      .count();
      if (left <= 0) break;
      auto frames = RecvFrames(*socket_, static_cast<int>(left));
      if (!frames.ok()) {
        if (frames.status().code() == absl::StatusCode::kDeadlineExceeded) break;
        Reconnect();
        return frames.status();
      }
      if (frames->size() != 2 || !(*frames)[0].empty()) {
        Reconnect();
        return Error(absl::StatusCode::kDataLoss, "protocol_error", "the sandbox's reply has a bad envelope");
      }
      v1::ToolResult result;
      if (!result.ParseFromString((*frames)[1])) {
        Reconnect();
        return Error(absl::StatusCode::kDataLoss, "protocol_error", "the sandbox's reply is not a ToolResult");
      }
      if (result.call_id() != call.call_id()) continue;  // a stale reply to an earlier call
      if (IsServiceRefusal(result)) {
        return ReasonError(result.error().reason(),
                           absl::StrCat("the sandbox at ", endpoint_, " refused: ",
                                        result.error().message()));
      }
      return result;
    }
  } catch (const zmq::error_t& e) {
    Reconnect();
    return Error(absl::StatusCode::kUnavailable, "unavailable", absl::StrCat("sandbox socket: ", e.what()));
  }
  if (monitor_ != nullptr) {
    monitor_->Drain();
    if (monitor_->failures() > 0) {
      Reconnect();
      return ReasonError("sandbox_peer_unknown",
                         absl::StrCat("the sandbox at ", endpoint_,
                                      " refused this client's CURVE key in the handshake"));
    }
  }
  Reconnect();
  return Error(absl::StatusCode::kDeadlineExceeded, "deadline_exceeded",
               absl::StrCat("no answer from the sandbox at ", endpoint_, " within ", timeout_ms, " ms"));
}

}  // namespace gantry::harness
