// CURVE + ZAP on the broker's ROUTER socket (docs/protocol.md, "CURVE and ZAP"): makes
// the socket a CURVE server with the router's secret key and answers libzmq's ZAP
// requests on inproc://zeromq.zap.01, admitting only worker public keys from the
// allow-list. Every handshake is counted; a refusal is logged (`broker.worker_refused`,
// with the key's fingerprint and the peer's address, never a secret) at most once per
// 10 seconds per key, since a refused worker keeps reconnecting.
//
// The allow-list also binds each key to what it may serve (docs/protocol.md, "Worker
// allow-list"): the models and bundle identities (BundleIdentity.identity_sha256) its
// READY may name. The ZAP reply's user id is the key's fingerprint, which libzmq attaches
// to every message of the connection ("User-Id"); the broker looks the grant up by it.
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
#include <set>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/zap_handler.h"
#include "router/broker/broker.h"

namespace gantry::broker {

// The ZAP domain the broker's socket announces.
inline constexpr char kWorkerZapDomain[] = "gantry-workers";

// Bounds of an allow-list entry's names.
inline constexpr size_t kMaxModelNameBytes = 128;

// The keys and grants of an allow-list's text (format: docs/protocol.md, "Worker
// allow-list"): one key per line with `models=` and `bundles=`, each a comma-separated
// list or `*`. Sorted by key.
// Errors: INVALID_ARGUMENT invalid_key_file naming the line: a bare key (the older
// one-key-per-line format: it would let the key serve anything), an unknown or repeated
// field, a bad name, an empty list, a key listed twice with different grants.
absl::StatusOr<std::vector<WorkerGrant>> ParseWorkerAllowList(absl::string_view text);
// The same over a file. Errors: as above with the path; NOT_FOUND when unreadable.
absl::StatusOr<std::vector<WorkerGrant>> ReadWorkerAllowListFile(const std::string& path);

// Whether `grant` lets its key serve `model` with bundle identity `bundle_sha256` (an
// empty set permits nothing; kAnyWorkerGrant permits everything).
bool GrantPermits(const WorkerGrant& grant, const std::string& model,
                  const std::string& bundle_sha256);

class WorkerAuth {
 public:
  // Binds the ZAP socket on `context` and sets CURVE server options on `router`, which
  // must not be bound yet. Logs `broker.worker_key_unbound` (a warning) for each key
  // that may serve any model or bundle. Errors: INVALID_ARGUMENT invalid_key_file (a key
  // does not decode, or two keys share a fingerprint), UNIMPLEMENTED (libzmq without
  // CURVE), UNAVAILABLE (the ZAP endpoint is taken: one CURVE broker per context).
  static absl::StatusOr<std::unique_ptr<WorkerAuth>> Install(zmq::context_t& context,
                                                             zmq::socket_t& router,
                                                             const CurveServerOptions& options);

  zmq::socket_t& zap_socket() { return zap_; }
  // Answers every ZAP request waiting, without blocking.
  void AnswerPending();
  void Close() { zap_.close(); }

  uint64_t admitted() const { return admitted_.load(); }
  uint64_t refused() const { return refused_.load(); }

  // The grant of the key whose fingerprint is `fingerprint` (a message's "User-Id"), or
  // nullptr when no allowed key has it.
  const WorkerGrant* GrantFor(const std::string& fingerprint) const;

 private:
  WorkerAuth(zmq::socket_t zap, ZapAllowList allow,
             std::map<std::string, WorkerGrant> by_fingerprint);
  void Record(const ZapDecision& decision);

  zmq::socket_t zap_;
  ZapAllowList allow_;
  const std::map<std::string, WorkerGrant> by_fingerprint_;
  std::atomic<uint64_t> admitted_{0};
  std::atomic<uint64_t> refused_{0};
  // fingerprint -> (last logged, ms on the monotonic clock; refusals since then)
  std::map<std::string, std::pair<int64_t, uint64_t>> last_logged_;
};

}  // namespace gantry::broker

#endif  // GANTRY_ROUTER_BROKER_WORKER_AUTH_H_
