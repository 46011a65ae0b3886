// Watches the handshakes of a CURVE client socket (zmq_socket_monitor) so that a refusal
// by the server's ZAP handler shows in this process's own log as
// `curve.handshake_failed` (docs/protocol.md, "CURVE and ZAP"). Without it a refused
// client only sees silence: libzmq retries the handshake quietly every reconnect interval.
//
// Threading: the monitor's socket belongs to the thread that owns the watched socket;
// that thread polls socket() and calls Drain() when it is readable. Destroy the monitor
// before the watched socket.
#ifndef GANTRY_COMMON_HANDSHAKE_MONITOR_H_
#define GANTRY_COMMON_HANDSHAKE_MONITOR_H_

#include <cstdint>
#include <memory>
#include <string>

#include <zmq.hpp>

#include "absl/status/statusor.h"

namespace gantry {

class HandshakeMonitor {
 public:
  // Starts watching `watched` (before it connects). `peer` names the server in logs.
  // Errors: INTERNAL when libzmq refuses the monitor.
  static absl::StatusOr<std::unique_ptr<HandshakeMonitor>> Attach(zmq::context_t& context,
                                                                  zmq::socket_t& watched,
                                                                  std::string peer);

  zmq::socket_t& socket() { return monitor_; }
  // Reads the events waiting, without blocking; logs a failure at most once per 10 s.
  void Drain();
  // Handshakes that failed so far (refused by ZAP, protocol errors).
  uint64_t failures() const { return failures_; }

 private:
  HandshakeMonitor(zmq::socket_t monitor, std::string peer)
      : monitor_(std::move(monitor)), peer_(std::move(peer)) {}

  zmq::socket_t monitor_;
  std::string peer_;
  uint64_t failures_ = 0;
  uint64_t unlogged_ = 0;
  int64_t last_logged_ms_ = -1;
};

}  // namespace gantry

#endif  // GANTRY_COMMON_HANDSHAKE_MONITOR_H_
