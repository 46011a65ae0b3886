// One HTTP/1.1 connection of HttpServer (http_server.h), and the ResponseWriter a
// handler answers it with. Private to router/http: the server's loop thread owns a
// connection's socket and parser; a writer, on any thread, queues its response under
// the connection's lock and sends it itself where the transport allows (plain TCP),
// else wakes the loop.
#ifndef GANTRY_ROUTER_HTTP_HTTP_CONN_H_
#define GANTRY_ROUTER_HTTP_HTTP_CONN_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "absl/strings/string_view.h"
#include "router/http/http_parser.h"
#include "router/http/http_server.h"
#include "router/http/transport.h"

namespace gantry::http {

// Milliseconds of CLOCK_MONOTONIC.
int64_t NowMs();
// "HTTP/1.1 <status> <reason>\r\n" and each header line (no blank line after).
std::string StatusLineAndHeaders(int status, const HeaderList& headers);

// One client connection. Fields marked (loop) are touched by the loop thread only;
// the rest under `mu`.
struct Conn {
  uint64_t id = 0;
  int fd = -1;                 // (loop) -1 once closed
  uint32_t peer = 0;           // (loop) the client's IPv4 address, network order
  std::unique_ptr<Transport> transport;  // (loop) plain or TLS over `fd`
  bool read_wants_write = false;         // (loop) TLS: a read waits for writability
  bool watching_writable = false;        // (loop) EPOLLOUT is in the fd's epoll interest
  std::unique_ptr<RequestParser> parser;  // (loop) the request being received
  std::string in;              // (loop) received while a request is answered, not parsed
  int64_t last_active_ms = 0;  // (loop) when the last response ended
  int64_t accepted_ms = 0;     // (loop)
  int64_t head_started_ms = 0;  // (loop) the first byte of the request under way
  int64_t head_done_ms = 0;     // (loop) the end of its head
  uint64_t served = 0;         // (loop) responses ended on this connection
  bool handling = false;       // (loop) a request is being answered
  bool sent_continue = false;  // (loop)
  // (loop) A refused request: input is discarded; once the answer is out the write side
  // is shut and the connection closes at `drain_until_ms` or when the client closes.
  bool draining = false;
  bool write_shut = false;
  int64_t drain_until_ms = 0;
  size_t drained_bytes = 0;
  std::string body_key;  // (loop) the key whose body place the request holds; "" none
  size_t body_charged = 0;  // (loop) body bytes counted against the budgets
  bool reads_paused = false;  // (loop) EPOLLIN off: pipelined input waits in the kernel

  std::mutex mu;
  uint64_t generation = 0;     // which request's response `response` describes
  std::string out;             // bytes to send
  size_t out_offset = 0;
  enum class Response { kNone, kStreaming, kDone } response = Response::kNone;
  bool keep_alive = true;      // of the request being answered
  bool closed = false;
  bool overflow = false;       // the client stopped reading
  // Plain TCP: a writer sends its bytes itself and ends a whole response cycle without
  // waking the loop (see ConnWriter::Flush). `input_buffered` tells it whether the loop
  // holds received bytes (a pipelined request) that only the loop can parse.
  bool input_buffered = false;
  bool ended_by_writer = false;  // the response ended and was sent, the loop not told yet
  // When the output last moved: bytes sent, or output queued with none pending. Output
  // pending and unmoved for write_stall_timeout_ms means a client that does not read.
  int64_t output_moved_ms = 0;
  std::function<void()> on_close;
};

// What a writer needs of the server that owns its connection.
class ConnLoop {
 public:
  virtual ~ConnLoop() = default;
  // Output was queued for `conn`, or its response ended: the loop is to look at it.
  virtual void MarkDirty(const std::shared_ptr<Conn>& conn) = 0;
  // Bytes a response may have queued and unsent; past it the connection closes.
  virtual size_t max_output_bytes() const = 0;
  // Whether writers may send on the socket themselves.
  virtual bool direct_writes() const = 0;
};

// The writer of one request's response (the connection's `generation` at the time):
// once the connection moved on to a later request, it writes nothing. Destroyed
// without a response, it answers 500 internal; destroyed half-way through a stream, it
// ends the connection (never a clean end of stream).
class ConnWriter : public ResponseWriter {
 public:
  ConnWriter(ConnLoop* server, std::shared_ptr<Conn> conn, uint64_t generation)
      : server_(server), conn_(std::move(conn)), generation_(generation) {}
  ~ConnWriter() override;

  bool Send(const HttpResponse& response) override;
  bool StartChunked(int status, const HeaderList& headers) override;
  bool WriteChunk(absl::string_view data) override;
  bool EndChunked() override;
  bool closed() const override;
  void OnClose(std::function<void()> fn) override;

 private:
  // Precondition: conn_->mu held. False once the connection moved on to a later request.
  bool Current() const { return conn_->generation == generation_; }
  // Precondition: conn_->mu held. Sends what is queued, on this thread when the
  // transport allows it and nothing needs the loop; otherwise wakes the loop to do it.
  // The loop is still needed for a partial write (it waits for EPOLLOUT), a failed one
  // or an overflow (it closes), a connection that closes after its response, and bytes
  // of a next request it already holds. A response ended here stays `handling` on the
  // loop until its next event for the connection (readable, or the idle sweep), which
  // finishes the cycle in Service().
  void Flush();
  // Precondition: conn_->mu held.
  void Append(absl::string_view bytes);

  ConnLoop* server_;
  std::shared_ptr<Conn> conn_;
  const uint64_t generation_;
};

}  // namespace gantry::http

#endif  // GANTRY_ROUTER_HTTP_HTTP_CONN_H_
