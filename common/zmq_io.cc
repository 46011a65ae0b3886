#include "common/zmq_io.h"

#include <sys/random.h>

#include <cstdlib>
#include <ctime>
#include <mutex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/error_codes.h"
#include "common/status.h"

namespace gantry {

absl::StatusOr<std::vector<std::string>> RecvFrames(zmq::socket_t& socket, int timeout_ms,
                                                    const RecvLimits& limits) {
  return RecvFrames(socket, timeout_ms, limits, nullptr);
}

absl::StatusOr<std::vector<std::string>> RecvFrames(zmq::socket_t& socket, int timeout_ms,
                                                    const RecvLimits& limits,
                                                    RecvMetadata* metadata) {
  try {
    // Without waiting, a plain non-blocking receive answers: zmq_poll would cost two
    // more system calls per message (the drain loops of the broker and the worker).
    if (timeout_ms != 0) {
      zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, std::chrono::milliseconds(timeout_ms)) == 0) {
        return absl::DeadlineExceededError("no message within the timeout");
      }
    }
    std::vector<std::string> frames;
    size_t total = 0;
    bool oversized = false;
    for (bool first = true;; first = false) {
      zmq::message_t part;
      // The first part is ready (or, not waiting, absent); later parts of a multipart
      // message arrive atomically.
      if (!socket.recv(part, zmq::recv_flags::dontwait)) {
        if (first && timeout_ms == 0) return absl::DeadlineExceededError("no message waiting");
        return absl::InternalError("multipart message ended early");
      }
      // A ROUTER's identity frame has no metadata when zmq_poll saw the message first.
      if (metadata != nullptr && (first || metadata->peer_address.empty())) {
        const char* address = zmq_msg_gets(part.handle(), "Peer-Address");
        const char* user = zmq_msg_gets(part.handle(), "User-Id");
        metadata->peer_address = address != nullptr ? address : "";
        metadata->user_id = user != nullptr ? user : "";
      }
      total += part.size();
      if (!oversized && (frames.size() >= limits.max_frames || total > limits.max_total_bytes)) {
        oversized = true;
        frames.clear();
      }
      if (!oversized) frames.emplace_back(part.to_string());
      if (!part.more()) break;
    }
    if (oversized) {
      return ReasonError("protocol_error",
                         absl::StrCat("message over the limits (", limits.max_frames, " frames, ",
                                limits.max_total_bytes, " bytes); discarded"));
    }
    return frames;
  } catch (const zmq::error_t& e) {
    return absl::UnavailableError(absl::StrCat("zmq recv: ", e.what()));
  }
}

absl::Status SendFrames(zmq::socket_t& socket, const std::vector<std::string>& frames) {
  try {
    for (size_t i = 0; i < frames.size(); ++i) {
      zmq::send_flags flags = zmq::send_flags::dontwait;
      if (i + 1 < frames.size()) flags = flags | zmq::send_flags::sndmore;
      if (!socket.send(zmq::buffer(frames[i]), flags)) {
        return ReasonError("worker_lost", "send would block (the peer's queue is full)");
      }
    }
    return absl::OkStatus();
  } catch (const zmq::error_t& e) {
    if (e.num() == EHOSTUNREACH) {
      return ReasonError("worker_lost", "peer identity is not routable (disconnected)");
    }
    return absl::InternalError(absl::StrCat("zmq send: ", e.what()));
  }
}

std::string LastEndpoint(zmq::socket_t& socket) {
  return socket.get(zmq::sockopt::last_endpoint);
}

bool IsLocalEndpoint(absl::string_view endpoint) {
  if (absl::StartsWith(endpoint, "ipc://") || absl::StartsWith(endpoint, "inproc://")) {
    return true;
  }
  if (!absl::ConsumePrefix(&endpoint, "tcp://")) return false;
  size_t colon = endpoint.rfind(':');
  if (colon == absl::string_view::npos) return false;
  absl::string_view host = endpoint.substr(0, colon);
  if (host == "localhost" || host == "[::1]") return true;
  // 127.0.0.0/8 written as a dotted quad (not "127.evil.example": digits and dots only).
  if (!absl::StartsWith(host, "127.")) return false;
  int dots = 0;
  for (char c : host) {
    if (c == '.') ++dots;
    else if (c < '0' || c > '9') return false;
  }
  return dots == 3;
}

absl::StatusOr<RouterEnvelope> SplitRouterEnvelope(std::vector<std::string> frames) {
  RouterEnvelope out;
  if (frames.size() == 3 && frames[1].empty()) {
    out.envelope = {std::move(frames[0]), ""};
    out.body = std::move(frames[2]);
    return out;
  }
  if (frames.size() == 2) {
    out.envelope = {std::move(frames[0])};
    out.body = std::move(frames[1]);
    return out;
  }
  return ReasonError("protocol_error",
                     absl::StrCat("expected [identity, \"\", body] or [identity, body], got ",
                                  frames.size(), " frames"));
}

void SeedRouterIdentities() {
  static std::once_flag once;
  std::call_once(once, [] {
    unsigned int seed = 0;
    if (getrandom(&seed, sizeof(seed), 0) != static_cast<ssize_t>(sizeof(seed))) {
      seed = static_cast<unsigned int>(time(nullptr)) ^ static_cast<unsigned int>(getpid() << 16) ^
             static_cast<unsigned int>(clock());
    }
    srand(seed);
  });
}

}  // namespace gantry
