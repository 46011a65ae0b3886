// CURVE + ZAP on the broker's ROUTER socket (docs/protocol.md, "CURVE and ZAP"): makes
// the socket a CURVE server with the router's secret key and answers libzmq's ZAP
// requests on inproc://zeromq.zap.01, admitting only worker public keys from the
// allow-list. Every handshake is counted; a refusal is logged (`broker.worker_refused`,
// with the key's fingerprint and the peer's address, never a secret) at most once per
// 10 seconds per key, since a refused worker keeps reconnecting.
//
// Threading: the broker thread owns the ZAP socket like its ROUTER socket: it polls
// zap_socket() next to the others and calls AnswerPending() when it is readable. The
// counters may be read from any thread.
#ifndef GANTRY_ROUTER_BROKER_WORKER_AUTH_H_
#define GANTRY_ROUTER_BROKER_WORKER_AUTH_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include <zmq.hpp>

#include "absl/status/statusor.h"
#include "common/zap_handler.h"
#include "router/broker/broker.h"

namespace gantry::broker {

// The ZAP domain the broker's socket announces.
inline constexpr char kWorkerZapDomain[] = "gantry-workers";

class WorkerAuth {
 public:
  // Binds the ZAP socket on `context` and sets CURVE server options on `router`, which
  // must not be bound yet. Errors: INVALID_ARGUMENT invalid_key_file (a key does not
  // decode), UNIMPLEMENTED (libzmq without CURVE), UNAVAILABLE (the ZAP endpoint is
  // taken: one CURVE broker per context).
  static absl::StatusOr<std::unique_ptr<WorkerAuth>> Install(zmq::context_t& context,
                                                             zmq::socket_t& router,
                                                             const CurveServerOptions& options);

  zmq::socket_t& zap_socket() { return zap_; }
  // Answers every ZAP request waiting, without blocking.
  void AnswerPending();
  void Close() { zap_.close(); }

  uint64_t admitted() const { return admitted_.load(); }
  uint64_t refused() const { return refused_.load(); }

 private:
  WorkerAuth(zmq::socket_t zap, ZapAllowList allow);
  void Record(const ZapDecision& decision);

  zmq::socket_t zap_;
  ZapAllowList allow_;
  std::atomic<uint64_t> admitted_{0};
  std::atomic<uint64_t> refused_{0};
  // fingerprint -> (last logged, ms on the monotonic clock; refusals since then)
  std::map<std::string, std::pair<int64_t, uint64_t>> last_logged_;
};

}  // namespace gantry::broker

#endif  // GANTRY_ROUTER_BROKER_WORKER_AUTH_H_
