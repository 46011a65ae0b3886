// Multipart send/receive on cppzmq sockets with Gantry's error vocabulary.
//
// Receiving bounds what a peer can make us hold (frame count and total bytes); an
// oversized message is drained and reported, never half-returned. Sending on a ROUTER
// socket with ZMQ_ROUTER_MANDATORY set reports an unroutable identity as UNAVAILABLE
// instead of dropping the message silently.
//
// Thread-safety: ZeroMQ sockets are not thread-safe; neither are these calls on the
// same socket.
#ifndef GANTRY_COMMON_ZMQ_IO_H_
#define GANTRY_COMMON_ZMQ_IO_H_

#include <cstddef>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gantry {

struct RecvLimits {
  size_t max_frames = 8;
  size_t max_total_bytes = (64u << 20) + 4096;
};

// Receives one whole multipart message, waiting at most `timeout_ms` (-1: forever,
// 0: do not wait).
// Errors: DEADLINE_EXCEEDED when nothing arrived in time; INVALID_ARGUMENT with reason
// "protocol_error" when the message exceeded `limits` (the rest of it is discarded);
// UNAVAILABLE when the socket or context was closed.
absl::StatusOr<std::vector<std::string>> RecvFrames(zmq::socket_t& socket, int timeout_ms,
                                                    const RecvLimits& limits = {});

// What libzmq says of the connection a message came over (zmq_msg_gets on the first of
// its frames that carries metadata; "" when none does: a ROUTER's identity frame has
// none when zmq_poll saw the message first). `peer_address` ("Peer-Address"): for tcp
// the peer's IP; for ipc libzmq appends ":UID:GID:PID" of the connecting process, read
// with SO_PEERCRED when the connection was accepted. `user_id` ("User-Id"): what the
// ZAP handler returned for the connection (the key fingerprint with CURVE).
struct RecvMetadata {
  std::string peer_address;
  std::string user_id;
};
// As above, and fills `*metadata` (may be null).
absl::StatusOr<std::vector<std::string>> RecvFrames(zmq::socket_t& socket, int timeout_ms,
                                                    const RecvLimits& limits,
                                                    RecvMetadata* metadata);

// Sends `frames` as one multipart message (non-blocking).
// Errors: UNAVAILABLE (reason "worker_lost") when the peer is unroutable or the send
// would block; INTERNAL on other socket errors.
absl::Status SendFrames(zmq::socket_t& socket, const std::vector<std::string>& frames);

// One request as received on a ROUTER socket: the envelope to send the reply behind
// and the single body frame.
struct RouterEnvelope {
  std::vector<std::string> envelope;  // [identity, ""] from a REQ peer, [identity] from a DEALER
  std::string body;
};

// Splits a message received on a ROUTER socket that serves one-frame requests:
// [identity, "", body] (a REQ peer, whose delimiter the reply must mirror) or
// [identity, body] (a DEALER peer that omits it). Reply with envelope + [reply body].
// Errors: INVALID_ARGUMENT with reason "protocol_error" for any other shape (fewer than
// 2 or more than 3 frames, or three frames whose middle one is not empty).
absl::StatusOr<RouterEnvelope> SplitRouterEnvelope(std::vector<std::string> frames);

// The endpoint a socket actually bound, e.g. "tcp://127.0.0.1:40123" after binding
// "tcp://127.0.0.1:*".
std::string LastEndpoint(zmq::socket_t& socket);

// Whether traffic to `endpoint` stays on this host: ipc:// and inproc://, or tcp:// to
// 127.0.0.0/8, [::1] or localhost. Anything else (tcp://*:P, tcp://eth0:P, any other
// address) may be reached from other hosts, so it needs CURVE (docs/router.md).
bool IsLocalEndpoint(absl::string_view endpoint);

// Call before creating a ROUTER socket that outside peers connect to. libzmq numbers
// the peers that set no routing id (0x00 + a counter) from rand(), which nothing seeds:
// every process starts at the same number, and a peer that chose the next numbers as
// its own routing ids makes libzmq abort the process when it generates one of them
// (found by a red team: any admitted worker key crashed the router). Seeds rand() once
// from the OS, so the numbers cannot be foreseen. Thread-safe; idempotent.
void SeedRouterIdentities();

}  // namespace gantry

#endif  // GANTRY_COMMON_ZMQ_IO_H_
