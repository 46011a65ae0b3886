#include "common/handshake_monitor.h"

#include <atomic>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/zmq_io.h"

namespace gantry {
namespace {

constexpr int kEvents = ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                        ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL;
constexpr int64_t kLogIntervalMs = 10000;

std::string Describe(uint16_t event, uint32_t value) {
  switch (event) {
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
      return absl::StrCat("refused by the server's ZAP handler (status ", value,
                          "): is this key in its allow-list?");
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
      return "CURVE protocol error (a wrong server key, or the server does not run CURVE)";
    default:
      return absl::StrCat("handshake failed (errno ", value, ")");
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<HandshakeMonitor>> HandshakeMonitor::Attach(
    zmq::context_t& context, zmq::socket_t& watched, std::string peer) {
  static std::atomic<uint64_t> next{0};
  const std::string endpoint = absl::StrCat("inproc://gantry-handshake-monitor-", ++next);
  if (zmq_socket_monitor(watched.handle(), endpoint.c_str(), kEvents) != 0) {
    return absl::InternalError(absl::StrCat("zmq_socket_monitor: ", zmq_strerror(zmq_errno())));
  }
  try {
    zmq::socket_t monitor(context, zmq::socket_type::pair);
    monitor.set(zmq::sockopt::linger, 0);
    monitor.connect(endpoint);
    return std::unique_ptr<HandshakeMonitor>(
        new HandshakeMonitor(std::move(monitor), std::move(peer)));
  } catch (const zmq::error_t& e) {
    return absl::InternalError(absl::StrCat("handshake monitor: ", e.what()));
  }
}

void HandshakeMonitor::Drain() {
  for (;;) {
    auto frames = RecvFrames(monitor_, 0);
    if (!frames.ok()) return;
    // libzmq's monitor message: frame 0 holds the event (16 bits) and a value (32 bits).
    if (frames->empty() || (*frames)[0].size() < 6) continue;
    uint16_t event;
    uint32_t value;
    std::memcpy(&event, (*frames)[0].data(), sizeof(event));
    std::memcpy(&value, (*frames)[0].data() + sizeof(event), sizeof(value));
    if ((event & kEvents) == 0) continue;
    ++failures_;
    ++unlogged_;
    const int64_t now = SystemClock().MonotonicMicros() / 1000;
    if (last_logged_ms_ >= 0 && now - last_logged_ms_ < kLogIntervalMs) continue;
    Log(LogLevel::kWarning, "curve.handshake_failed",
        {{"peer", peer_}, {"why", Describe(event, value)}, {"failures", absl::StrCat(unlogged_)}});
    last_logged_ms_ = now;
    unlogged_ = 0;
  }
}

}  // namespace gantry
