// The gRPC gantry.v1.Gateway service (proto/gantry/v1/gateway.proto, docs/protocol.md
// section 7): the typed twin of the OpenAI HTTP API, on its own listener
// (gantry-router --grpc-listen HOST:PORT), in front of the same pipeline
// (Gateway::AuthenticateKey, then Gateway::Admit) as HTTP.
//
//   Chat        metadata "authorization: Bearer KEY"; request checked by
//               grpc_chat_request.h. A refusal before admission is a gRPC status whose
//               code is the reason's canonical code (common/error_codes.cc: the same
//               table as HTTP), whose message starts with "<reason>: ", with trailing
//               metadata x-gantry-error-code: <reason> (and x-gantry-retry-after-ms for
//               retryable reasons, the policy headers once the policy was consulted).
//               Once admitted: initial metadata x-gantry-request-id, x-gantry-policy-*
//               (x-gantry-bundle-sha256 with a live bundle), then the events: first an
//               `admitted` StreamEvent (seq 0, the request id) at once, then the
//               request's events (sentence-sized text for the accessibility class), a
//               Usage event with include_usage, and exactly one Terminal; failures after
//               admission arrive as that Terminal and the call ends OK.
//   ListModels  authenticated; every served model with the live bundle's facts when a
//               worker of it is LIVE (context length, default output cap, tool protocol)
//               and its live worker count.
//   Cancel      authenticated; cancels a live request only for the principal that
//               started it (over gRPC or HTTP); any other id answers cancelled: false.
//
// Every call is authenticated on its initial metadata, before gRPC reads any of its
// request message: the listener is one generic callback service (gRPC reads no payload
// for it) that looks up the method, checks a gantry.v1.Gateway call's key and takes the
// stream or watcher cap, and only then reads the one request message. A refusal at
// that point reaches the client at once; the bytes of its message stay in the client's
// flow-control window. grpc.health.v1.Health stays open (like /readyz); any other
// method is UNIMPLEMENTED, unread.
//
// A client that goes away (deadline, cancel, disconnect) cancels the request on its
// worker as soon as gRPC reports it (OnCancel, or a write that fails), and the call
// still waits for the request's Terminal, so that its outcome is recorded.
//
// gRPC headers stay in grpc_gateway.cc (this header forward-declares; a pimpl), so only
// that file pays for compiling them.
//
// Thread-safety: gRPC's callback threads authenticate, read and answer the unary
// methods. A Chat call is checked and admitted on a pool thread; its events are
// then written from where they are delivered (the broker's thread), one at a time, with
// no thread waiting for them. A Watch call waits on a thread of its own. The listener
// holds no state beyond the Gateway's (thread-safe), two counters and the thread that
// releases accessibility text held past a silence.
#ifndef GANTRY_ROUTER_GRPC_GATEWAY_H_
#define GANTRY_ROUTER_GRPC_GATEWAY_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace gantry::router {

class Gateway;

struct GrpcGatewayOptions {
  // HOST:PORT; port 0 picks a free port (see GrpcGateway::port()).
  std::string listen = "127.0.0.1:0";
  // PEM files, both or neither: TLS (the HTTP listener's --tls-cert / --tls-key).
  std::string tls_cert_path;
  std::string tls_key_path;
  // Limits (docs/protocol.md, "Listener limits"): concurrent streams per HTTP/2
  // connection; concurrent authenticated Chat calls on the listener (one more is
  // refused server_busy, unread); concurrent
  // grpc.health.v1.Health/Watch calls (each holds a thread while it waits; one more is
  // refused RESOURCE_EXHAUSTED); the largest request message (refused before it is
  // buffered whole); the memory gRPC's buffers of this listener may use (its resource
  // quota: past it gRPC shrinks its flow-control windows and then cancels streams);
  // keepalive enforcement: a client that pings more often than every
  // `min_ping_interval_ms` without data is sent GOAWAY after two strikes, and a
  // connection idle for `max_connection_idle_ms` is closed.
  int max_concurrent_streams = 256;
  int max_streams = 4096;
  int max_health_watchers = 64;
  int max_receive_message_bytes = 16 << 20;
  int64_t max_memory_bytes = int64_t{256} << 20;
  // While gRPC reads a call's request message the call holds a read place: at most
  // `max_reads_per_principal` per principal and `max_reads` in all for the Gateway's
  // methods, `max_health_reads_per_peer` per peer address and `max_health_reads` in all
  // for the open health service (each may make gRPC buffer up to
  // max_receive_message_bytes). One more is refused, unread. A message that has not
  // arrived within `read_timeout_ms` of the call's headers ends the call.
  int max_reads_per_principal = 128;
  int max_reads = 1024;
  int max_health_reads_per_peer = 2;
  int max_health_reads = 16;
  int read_timeout_ms = 5000;
  // A health request is a few dozen bytes: one not in within this is cancelled.
  int health_read_timeout_ms = 1000;
  // The bytes of Chat requests read and not yet through Admit (which renders and counts
  // the whole prompt before budgets and rates apply), per principal and in all; one more
  // request past either is refused server_busy (retryable). A request alone always fits
  // (max_receive_message_bytes is below the per-principal cap).
  int64_t max_admitting_bytes_per_principal = int64_t{32} << 20;
  int64_t max_admitting_bytes = int64_t{256} << 20;
  int min_ping_interval_ms = 10000;
  int max_connection_idle_ms = 300000;
};

class GrpcGateway {
 public:
  // Binds and starts serving. `gateway` is not owned and must outlive this object.
  // Errors: invalid_tls_config (a certificate or key that cannot be loaded, or that do
  // not match); UNAVAILABLE when the address cannot be bound; INVALID_ARGUMENT for a
  // listen address that is not HOST:PORT.
  static absl::StatusOr<std::unique_ptr<GrpcGateway>> Start(Gateway* gateway,
                                                            GrpcGatewayOptions options);
  // Stops the server: streams in flight end (their requests are cancelled on the
  // workers), new calls are refused.
  ~GrpcGateway();
  GrpcGateway(const GrpcGateway&) = delete;
  GrpcGateway& operator=(const GrpcGateway&) = delete;

  // The bound port.
  int port() const;
  // Calls holding a read place now (the Gateway's and the health service's).
  int calls_being_read() const;

  struct Impl;

 private:
  explicit GrpcGateway(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gantry::router

#endif  // GANTRY_ROUTER_GRPC_GATEWAY_H_
