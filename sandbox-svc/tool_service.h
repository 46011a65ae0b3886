// gantry-sandbox's ZeroMQ front: ROUTER sockets that take serialized ToolCalls from
// authenticated callers and answer serialized ToolResults (docs/protocol.md, "Tool
// events"; docs/sandbox.md, "Service").
//
// Callers: the service trusts no caller. Each connection is tied to one peer identity
// that the caller cannot choose, and the configuration maps each admitted identity to
// exactly one principal of the access policy:
//   - a Unix socket (ipc://PATH, the default): the peer is the uid of the process that
//     connected, which the kernel records at connect() (SO_PEERCRED; libzmq appends
//     ":UID:GID:PID" to the connection's Peer-Address). The socket file is created
//     mode 0600 and then given `socket_mode` / `socket_gid`: the file mode is a first
//     fence, the uid mapping is the check.
//   - optionally tcp with CURVE (`curve_endpoint`): the peer is the client's CURVE
//     public key, proven in the handshake; keys outside `peer_keys` are refused by the
//     ZAP handler during the handshake (ZAP 400), so they never deliver a message.
// A ToolCall over ipc from a uid that maps to no principal is answered TOOL_ERROR
// PERMISSION_DENIED `sandbox_peer_unknown` (under its call id) and logged
// (`sandbox.peer_refused`, at most once per 10 s per peer); nothing runs. The
// principal whose command rules apply is the peer's: ToolGrant.exec_rules may be empty
// (it is then set to the principal) or equal to it; anything else is answered
// `sandbox_principal_mismatch` and nothing runs.
//
// Frames, as a ROUTER sees them: [identity, "", body] from a REQ client, or
// [identity, body] from a DEALER that sends no delimiter; the reply mirrors the
// envelope. A message of any other shape, or over 64 MiB, is dropped and counted (no
// identity can be trusted to answer). A body that is not a ToolCall is answered with a
// ToolResult TOOL_ERROR (reason "protocol_error") and counted. When the bounded queue
// is full the call is answered TOOL_ERROR with reason "queue_full" at once.
//
// Structure: one I/O thread owns the ROUTER sockets (and the ZAP socket); a fixed pool
// of workers runs Sandbox::Run and hands replies back over an inproc PUSH/PULL pair
// (ZeroMQ sockets are not shared between threads).
//
// Thread-safety: Start/Stop from one thread; stats() from any thread. Start sets the
// process umask for the moment of the ipc bind.
#ifndef GANTRY_SANDBOX_SVC_TOOL_SERVICE_H_
#define GANTRY_SANDBOX_SVC_TOOL_SERVICE_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "absl/status/status.h"
#include "sandbox-svc/sandbox.h"

namespace gantry::sandbox {

inline constexpr char kDefaultSandboxEndpoint[] = "ipc:///run/gantry/sandbox.sock";
// The ZAP domain of the CURVE socket.
inline constexpr char kSandboxZapDomain[] = "gantry-sandbox";

struct ToolServiceOptions {
  // The Unix socket, "ipc://" and an absolute path (at most 107 bytes); "" for none. An
  // existing socket file that no service answers on is replaced; any other file there,
  // or a live socket, fails Start. A missing parent directory is created (mode 0755).
  std::string endpoint = kDefaultSandboxEndpoint;
  mode_t socket_mode = 0600;
  gid_t socket_gid = static_cast<gid_t>(-1);  // -1: the service's own group
  // Admitted callers on the Unix socket: uid -> principal (a user or service account of
  // the access policy, e.g. "harness").
  std::map<uid_t, std::string> peer_uids;
  // Optional: "tcp://HOST:PORT" served with CURVE; "" for none.
  std::string curve_endpoint;
  std::string curve_secret_z85;  // the service's secret key (40 Z85 characters)
  // Admitted CURVE clients: public key (40 Z85 characters) -> principal.
  std::map<std::string, std::string> peer_keys;
  size_t workers = 4;
  size_t queue_capacity = 64;
};

struct ToolServiceStats {
  uint64_t received = 0;
  uint64_t replied = 0;
  uint64_t dropped_malformed = 0;    // wrong envelope or oversized: no reply
  uint64_t answered_malformed = 0;   // body not a ToolCall: TOOL_ERROR reply
  uint64_t rejected_queue_full = 0;
  uint64_t refused_peer = 0;         // sandbox_peer_unknown replies
  uint64_t refused_principal = 0;    // sandbox_principal_mismatch replies
  uint64_t refused_handshakes = 0;   // CURVE keys the ZAP handler refused
};

class ToolService {
 public:
  // `sandbox` must outlive the service.
  ToolService(const Sandbox& sandbox, ToolServiceOptions options);
  ~ToolService();  // Stop()s

  // Binds and starts the threads. Errors: INVALID_ARGUMENT invalid_request (no endpoint,
  // an endpoint of the wrong transport, an empty principal, a peer key that does not
  // decode, CURVE without a secret key); INVALID_ARGUMENT invalid_key_file (the secret
  // key); UNAVAILABLE no_worker when an endpoint cannot be bound (also: the path is
  // taken by another file or a live socket).
  absl::Status Start();
  // The endpoints actually bound (after Start): "ipc:///run/gantry/sandbox.sock",
  // "tcp://127.0.0.1:40123"; "" where none.
  std::string endpoint() const { return bound_; }
  std::string curve_endpoint() const { return curve_bound_; }
  // Stops accepting, finishes running calls, joins the threads, removes the socket
  // file. Idempotent.
  void Stop();
  ToolServiceStats stats() const;

 private:
  struct Job {
    int socket = 0;                     // 0: the Unix socket, 1: CURVE
    std::vector<std::string> envelope;  // identity (+ "" delimiter)
    std::string body;
    std::string principal;
    std::string peer;                   // for logs: "uid 1001 pid 77", "key 3f2a..."
  };
  absl::Status BindIpc();
  absl::Status BindCurve();
  void IoLoop();
  void WorkerLoop();
  void AnswerZap();
  // The peer and its principal ("" when unknown) of a message on `socket`.
  void Identify(int socket, const std::string& peer_address, const std::string& user_id,
                Job* job) const;
  void LogRefusal(const std::string& peer, const std::string& why, const std::string& call_id);

  const Sandbox& sandbox_;
  ToolServiceOptions options_;
  zmq::context_t context_;
  std::unique_ptr<zmq::socket_t> ipc_;
  std::unique_ptr<zmq::socket_t> curve_;
  std::unique_ptr<zmq::socket_t> zap_;
  std::map<std::string, std::string> fingerprint_principal_;
  std::vector<std::string> allowed_keys_;
  std::string bound_, curve_bound_;
  std::string socket_path_;
  ino_t socket_ino_ = 0;
  std::string inproc_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> active_workers_{0};
  std::thread io_;
  std::vector<std::thread> workers_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  ToolServiceStats stats_;
  // I/O thread only: peer -> (last logged, monotonic ms; refusals since then).
  std::map<std::string, std::pair<int64_t, uint64_t>> refusal_log_;
};

}  // namespace gantry::sandbox

#endif  // GANTRY_SANDBOX_SVC_TOOL_SERVICE_H_
