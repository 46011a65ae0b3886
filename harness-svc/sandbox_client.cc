#include "harness-svc/sandbox_client.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "common/zmq_io.h"

namespace gantry::harness {

SandboxClient::SandboxClient(std::string endpoint) : endpoint_(std::move(endpoint)), context_(1) {
  Reconnect();
}

SandboxClient::~SandboxClient() {
  socket_.reset();
  context_.close();
}

void SandboxClient::Reconnect() {
  socket_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::dealer);
  socket_->set(zmq::sockopt::linger, 0);
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
      return result;
    }
  } catch (const zmq::error_t& e) {
    Reconnect();
    return Error(absl::StatusCode::kUnavailable, "unavailable", absl::StrCat("sandbox socket: ", e.what()));
  }
  Reconnect();
  return Error(absl::StatusCode::kDeadlineExceeded, "deadline_exceeded",
               absl::StrCat("no answer from the sandbox at ", endpoint_, " within ", timeout_ms, " ms"));
}

}  // namespace gantry::harness
