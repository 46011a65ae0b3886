// A small HTTP/1.1 server for the gateway: one epoll event-loop thread owns every
// socket (non-blocking, keep-alive, pipelining-safe), and a fixed pool of handler
// threads runs the application's Handler for each complete request. A handler may
// block for the whole of a streamed response, so the pool grows by one thread whenever
// a request finds every thread busy, up to `max_handler_threads` (then requests wait in
// order); threads are kept until Stop(). A thousand concurrent streams are a thousand
// mostly sleeping threads (tested in gateway_test.cc).
//
// Flow per connection: the loop reads and parses (router/http/http_parser.h); a
// complete request is handed to the pool with a ResponseWriter (or, when `run_on_loop`
// says the handler cannot block, handled on the loop thread itself); while it is being
// answered, further pipelined bytes stay buffered and are parsed only after the
// response has been written out, so responses leave in request order. On plain TCP the
// thread that calls a ResponseWriter method sends the bytes itself (non-blocking, under
// the connection's lock) and wakes the loop only when it must: a partial or failed
// write, a response that closes the connection, or bytes of a next request already
// buffered; this saves a thread hand-off per response. With TLS every byte goes through
// the loop thread, which owns the SSL object. Framing errors
// are answered with an OpenAI-style JSON error (error_response.h) and the connection is
// closed. With `tls` set, every connection is TLS (tls.h): the handshake and each
// record run non-blocking on the loop thread, and a read that must write (or a write
// that must read) waits for that direction; a failed handshake closes only its own
// connection.
//
// Limits: at most `max_connections` open connections, and `max_connections_per_peer`
// from one IPv4 address (one more is answered 503 server_busy and closed at once, before
// any state is kept for it; with TLS, closed without an answer). When the table is full,
// a new connection first takes the place of the oldest one that is waiting for a
// request head (its first, or the next on a kept-alive connection), which is closed:
// connections that never complete a head cannot keep others out; `HttpLimits` for each
// request; `max_output_bytes` of unsent output per connection, and
// `write_stall_timeout_ms` without any of it moving (a client that stops reading is
// disconnected); while a request is answered, at most 64 KiB of what the client
// pipelines behind it is buffered, then the server stops reading until the response
// ends. A full table that has no connection waiting for a head makes room by closing
// the one whose response has stood still longest (over a second). Deadlines, none of them restarted by a byte (a client
// trickling bytes cannot hold a connection): a request's head must be complete within
// `head_timeout_ms` of its first byte (the first request's: of the accept), its body
// within `body_timeout_ms` of the head, and after `body_rate_grace_ms` the body must
// have come at `min_body_bytes_per_s` on average; each is answered 408 request_timeout
// and the connection closed. A keep-alive connection with no request under way closes
// after `idle_timeout_ms`; a TLS connection still in its handshake after
// `handshake_timeout_ms`. `on_headers` may refuse a request once its header section is
// complete, before its body is read (the gateway answers an unknown key 401 there), and
// caps the bodies read at once per key it names (`max_bodies_per_key`).
// After refusing a request the server stops reading it: it answers, half-closes, and
// discards what the client still sends for a moment (so that the answer is not lost to
// a reset), then closes.
//
// Thread-safety: Start/Stop from one thread. ResponseWriter methods are thread-safe
// and may be called from any thread, also after the handler returned.
#ifndef GANTRY_ROUTER_HTTP_HTTP_SERVER_H_
#define GANTRY_ROUTER_HTTP_HTTP_SERVER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "router/http/http_parser.h"

namespace gantry::http {

class TlsContext;  // tls.h; OpenSSL stays out of this header

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct HttpResponse {
  int status = 200;
  HeaderList headers;  // Content-Length and Connection are added by the server
  std::string body;
};

// The reason phrase of a status code ("OK", "Too Many Requests"); "Unknown" otherwise.
const char* ReasonPhrase(int status);

class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;
  // A whole response, framed by Content-Length. False when the connection is gone or a
  // response was already started (nothing is sent then).
  virtual bool Send(const HttpResponse& response) = 0;
  // A streamed response (Transfer-Encoding: chunked): StartChunked once, WriteChunk any
  // number of times (empty data is skipped), EndChunked once. False when the connection
  // is gone or the call is out of order.
  virtual bool StartChunked(int status, const HeaderList& headers) = 0;
  virtual bool WriteChunk(absl::string_view data) = 0;
  virtual bool EndChunked() = 0;
  // Whether the peer went away (or the server closed the connection).
  virtual bool closed() const = 0;
  // Registers `fn` to run once when the connection closes before the response ended
  // (on the loop thread; keep it short and non-blocking). Runs at once, on the calling
  // thread, when already closed.
  virtual void OnClose(std::function<void()> fn) = 0;
};

// Runs on a pool thread (on the loop thread when HttpServerOptions::run_on_loop says
// so). Must answer through `writer` eventually (here or later from
// another thread); a writer dropped without a response answers 500 internal.
using Handler = std::function<void(HttpRequest request, std::shared_ptr<ResponseWriter> writer)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: an ephemeral port (see HttpServer::port())
  HttpLimits limits;
  size_t max_connections = 4096;
  size_t max_connections_per_peer = 1024;  // 0: no limit per address
  size_t handler_threads = 32;       // started at once
  size_t max_handler_threads = 4096;
  size_t max_output_bytes = 32u << 20;
  int idle_timeout_ms = 120000;  // between requests of a keep-alive connection
  int head_timeout_ms = 10000;   // request line and headers, from their first byte
  int body_timeout_ms = 60000;   // the whole body, from the end of the head
  size_t min_body_bytes_per_s = 1024;  // 0: no minimum rate
  int body_rate_grace_ms = 5000;       // of a body, before the rate is looked at
  // A TLS connection whose handshake is not done after this long is closed (a client
  // that stalls its handshake must not hold a connection slot for the idle timeout).
  int handshake_timeout_ms = 10000;
  // A response whose unsent bytes have not moved for this long is given up and its
  // connection closed (a client that stopped reading); 0 closes at the next sweep.
  int write_stall_timeout_ms = 30000;
  // When set, the listener speaks TLS only (TlsContext::Load); otherwise plain TCP.
  std::shared_ptr<const TlsContext> tls;
  // Optional. A request for which this returns true runs the Handler on the loop thread
  // itself, saving the hand-off to a pool thread; the Handler must then return quickly
  // and never block (it may answer later from another thread). Called on the loop
  // thread; must be cheap.
  std::function<bool(const HttpRequest&)> run_on_loop;
  // Optional. Called on the loop thread when a request's header section is complete
  // (`head` has everything but the body), before any body byte is read; a non-OK status
  // is answered at once (error_response.h) and the request's body is never read. Must
  // be cheap and never block. It may name the request's body key (the gateway: its
  // principal): at most `max_bodies_per_key` requests of one key are read at once past
  // their heads, and one more is refused 503 server_busy before its body, so that one
  // key trickling bodies from many addresses cannot hold every connection.
  std::function<absl::Status(const HttpRequest& head, std::string* body_key)> on_headers;
  size_t max_bodies_per_key = 128;
  // Body bytes held by the requests being read, of one key and in all: the request
  // whose bytes pass either is refused 503 server_busy (found by a red team: 128 bodies
  // of 16 MiB sent to their last byte held 2 GiB per key).
  size_t max_body_bytes_per_key = 32u << 20;
  size_t max_body_bytes_in_all = 256u << 20;
};

class HttpServer {
 public:
  // Binds, listens and starts the loop and pool threads.
  // Errors: INVALID_ARGUMENT (bad host), UNAVAILABLE (bind/listen failed), INTERNAL.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(HttpServerOptions options,
                                                           Handler handler);
  // Stop()s.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The bound port.
  int port() const;
  // Closes the listener and every connection (their OnClose hooks run), then waits for
  // running handlers to return. Idempotent.
  void Stop();
  // Open connections now (for /metrics and tests).
  size_t connection_count() const;
  // Connections refused at accept (over a connection limit) so far.
  uint64_t refused_connections() const;
  // Connections closed to make room while they waited for a request head.
  uint64_t evicted_connections() const;
  // Requests answered 408 request_timeout (a deadline or the minimum rate) so far.
  uint64_t timed_out_requests() const;
  // CPU time of the event-loop thread so far, in seconds (tests, benchmarks).
  double loop_cpu_seconds() const;

  class Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gantry::http

#endif  // GANTRY_ROUTER_HTTP_HTTP_SERVER_H_
