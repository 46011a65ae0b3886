#include "router/http/http_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "common/error_codes.h"
#include "common/log.h"
#include "common/status.h"
#include "common/thread_pool.h"
#include "router/http/error_response.h"
#include "router/http/http_conn.h"
#include "router/http/tls.h"
#include "router/http/transport.h"

namespace gantry::http {

const char* ReasonPhrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Content Too Large";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 499: return "Client Closed Request";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Unknown";
  }
}

namespace {

// How long a refused request's connection discards input before it closes, and how
// much.
constexpr int64_t kDrainMs = 2000;
constexpr size_t kMaxDrainBytes = 4u << 20;
// Pipelined bytes buffered while a response is under way, at most (then reads pause).
constexpr size_t kPipelinedBytes = 64u << 10;
// A full table also makes room by closing a connection whose response has not moved
// for this long (its client does not read), oldest first.
constexpr int64_t kEvictStalledAfterMs = 1000;

}  // namespace

class HttpServer::Impl : public ConnLoop {
 public:
  Impl(HttpServerOptions options, Handler handler)
      : options_(std::move(options)), handler_(std::move(handler)) {}
  ~Impl() { Stop(); }

  absl::Status Start();
  void Stop();
  int port() const { return port_; }
  size_t connection_count() const { return conn_count_.load(); }

  // Called by writers: output was queued for `conn`.
  void MarkDirty(const std::shared_ptr<Conn>& conn) override {
    {
      std::lock_guard<std::mutex> lock(dirty_mu_);
      dirty_.push_back(conn);
    }
    uint64_t one = 1;
    ssize_t n = write(event_fd_, &one, sizeof(one));
    (void)n;
  }
  size_t max_output_bytes() const override { return options_.max_output_bytes; }
  // Plain TCP only: TLS records stay on the loop thread, which owns the SSL object.
  bool direct_writes() const override { return !options_.tls; }

 private:
  void Loop();
  void Accept();
  // Answers 503 server_busy on a connection that is not kept, and closes it.
  void Refuse(int fd, const char* why);
  void OnReadable(const std::shared_ptr<Conn>& conn);
  // Flushes output; completes the response cycle; parses the next request.
  void Service(const std::shared_ptr<Conn>& conn);
  // Parses the bytes buffered in conn->in (after a response ended).
  void TryParse(const std::shared_ptr<Conn>& conn);
  // Feeds `data` to the connection's parser up to a complete request (left in *ready)
  // or an error (answered here); returns the bytes used. Never touches conn->in.
  size_t Consume(const std::shared_ptr<Conn>& conn, absl::string_view data,
                 std::unique_ptr<HttpRequest>* ready);
  // Answers a request that is refused before it is handled, and starts draining.
  void RefuseRequest(const std::shared_ptr<Conn>& conn, const absl::Status& status);
  // Hands a complete request to the handler (pool or loop thread).
  void Dispatch(const std::shared_ptr<Conn>& conn, std::unique_ptr<HttpRequest> request);
  // Deadlines of connections that are not being answered (the sweep).
  void CheckDeadlines(const std::shared_ptr<Conn>& conn, int64_t now,
                      std::vector<std::shared_ptr<Conn>>* to_close);
  void Close(const std::shared_ptr<Conn>& conn);
  // Gives back the body place a request holds (when its body is in, or it ends).
  // Counts the body bytes the request's parser holds now against the key's and the
  // server's budgets; past either, refuses the request (503 server_busy) and returns
  // false.
  bool ChargeBody(const std::shared_ptr<Conn>& conn);
  void ReleaseBodyPlace(Conn& conn);
  void UpdateInterest(const std::shared_ptr<Conn>& conn, bool want_write);
  // Stops or resumes reading the connection (EPOLLIN), keeping its EPOLLOUT.
  void SetReadsPaused(const std::shared_ptr<Conn>& conn, bool paused);

 public:
  uint64_t refused() const { return refused_.load(); }
  uint64_t evicted() const { return evicted_.load(); }
  uint64_t timed_out() const { return timed_out_.load(); }
  double loop_cpu_seconds() const {
    clockid_t clock;
    timespec ts{};
    if (!loop_thread_.joinable() ||
        pthread_getcpuclockid(const_cast<std::thread&>(loop_thread_).native_handle(), &clock) != 0 ||
        clock_gettime(clock, &ts) != 0) {
      return 0;
    }
    return static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
  }

 private:
  HttpServerOptions options_;
  Handler handler_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int event_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  bool stopped_ = false;
  std::thread loop_thread_;
  std::unordered_map<uint64_t, std::shared_ptr<Conn>> conns_;  // (loop)
  // (loop) Connections waiting for a request head (their first, or the next on a
  // kept-alive connection), oldest id first: when the table is full, the oldest is
  // closed to make room, so connections that never send a whole head cannot keep a
  // new client out (found by a red team: 4 source addresses filled 4,096 slots).
  std::set<uint64_t> waiting_head_;
  // (loop) Requests past their head, by key: how many, and the body bytes they hold.
  struct Bodies {
    size_t count = 0;
    size_t bytes = 0;
  };
  std::map<std::string, Bodies> bodies_by_key_;
  size_t body_bytes_ = 0;  // (loop) body bytes held by all requests being read
  std::atomic<uint64_t> evicted_{0};
  std::atomic<size_t> conn_count_{0};
  uint64_t next_id_ = 1;
  int64_t last_sweep_ms_ = 0;  // (loop)
  std::unordered_map<uint32_t, size_t> per_peer_;  // (loop) open connections per address
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint64_t> timed_out_{0};  // requests answered 408
  int64_t accept_paused_until_ms_ = 0;  // (loop) out of descriptors: accept later

  std::mutex dirty_mu_;
  std::vector<std::shared_ptr<Conn>> dirty_;

  // The handler threads (common/thread_pool.h): started in Start, stopped in Stop.
  std::unique_ptr<ThreadPool> pool_;
};

absl::Status HttpServer::Impl::Start() {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(options_.port));
  if (inet_pton(AF_INET, options_.host.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("not an IPv4 address: ", options_.host));
  }
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return absl::UnavailableError(absl::StrCat("bind ", options_.host, ":", options_.port,
                                               ": ", strerror(errno)));
  }
  if (listen(listen_fd_, 512) != 0) {
    return absl::UnavailableError(absl::StrCat("listen: ", strerror(errno)));
  }
  socklen_t len = sizeof(addr);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  event_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || event_fd_ < 0) return absl::InternalError("epoll/eventfd setup failed");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;  // listener
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  ev.data.u64 = 1;  // eventfd
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, event_fd_, &ev);
  next_id_ = 2;
  pool_ = std::make_unique<ThreadPool>("http-handler", options_.handler_threads,
                                       options_.max_handler_threads);
  loop_thread_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

void HttpServer::Impl::Stop() {
  if (stopped_) return;
  stopped_ = true;
  stopping_ = true;
  if (event_fd_ >= 0) {
    uint64_t one = 1;
    ssize_t n = write(event_fd_, &one, sizeof(one));
    (void)n;
  }
  if (loop_thread_.joinable()) loop_thread_.join();
  if (pool_ != nullptr) pool_->Stop();
  {
    std::lock_guard<std::mutex> lock(dirty_mu_);
    dirty_.clear();
  }
  if (listen_fd_ >= 0) close(listen_fd_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (event_fd_ >= 0) close(event_fd_);
  listen_fd_ = epoll_fd_ = event_fd_ = -1;
}

void HttpServer::Impl::Loop() {
  pthread_setname_np(pthread_self(), "http-loop");  // shown by top -H and perf
  epoll_event events[64];
  while (!stopping_) {
    int n = epoll_wait(epoll_fd_, events, 64, 50);
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < n; ++i) {
      uint64_t key = events[i].data.u64;
      if (key == 0) {
        Accept();
      } else if (key == 1) {
        uint64_t count;
        while (read(event_fd_, &count, sizeof(count)) > 0) {
        }
      } else {
        auto it = conns_.find(key);
        if (it == conns_.end()) continue;
        std::shared_ptr<Conn> conn = it->second;
        const uint32_t ev = events[i].events;
        if ((ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) ||
            ((ev & EPOLLOUT) && conn->read_wants_write)) {
          OnReadable(conn);
        }
        if (conn->fd >= 0) Service(conn);
      }
    }
    std::vector<std::shared_ptr<Conn>> dirty;
    {
      std::lock_guard<std::mutex> lock(dirty_mu_);
      dirty.swap(dirty_);
    }
    for (auto& conn : dirty) {
      if (conn->fd >= 0) Service(conn);
    }
    // Deadlines, and responses their writers ended (Service finishes those cycles),
    // looked at most every 50 ms.
    int64_t now = NowMs();
    if (now - last_sweep_ms_ < 50) continue;
    last_sweep_ms_ = now;
    if (accept_paused_until_ms_ != 0 && now >= accept_paused_until_ms_) {
      accept_paused_until_ms_ = 0;
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = 0;
      epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
    }
    std::vector<std::shared_ptr<Conn>> to_close, ended;
    for (auto& [id, conn] : conns_) {
      if (conn->draining) {
        if (now >= conn->drain_until_ms) to_close.push_back(conn);
      } else if (conn->handling) {
        std::lock_guard<std::mutex> lock(conn->mu);
        if (conn->ended_by_writer) {
          ended.push_back(conn);
        } else if (conn->out_offset < conn->out.size() &&
                   now - conn->output_moved_ms > options_.write_stall_timeout_ms) {
          ++timed_out_;  // a client that stopped reading its response
          to_close.push_back(conn);
        }
      } else {
        CheckDeadlines(conn, now, &to_close);
      }
    }
    for (auto& conn : ended) {
      if (conn->fd >= 0) Service(conn);
    }
    for (auto& conn : to_close) Close(conn);
  }
  std::vector<std::shared_ptr<Conn>> all;
  for (auto& [id, conn] : conns_) all.push_back(conn);
  for (auto& conn : all) Close(conn);
}

void HttpServer::Impl::CheckDeadlines(const std::shared_ptr<Conn>& conn, int64_t now,
                                      std::vector<std::shared_ptr<Conn>>* to_close) {
  if (!conn->transport->Established()) {
    if (now - conn->accepted_ms > options_.handshake_timeout_ms) to_close->push_back(conn);
    return;
  }
  const RequestParser& parser = *conn->parser;
  std::string why;
  if (!parser.started()) {
    // Nothing of a request yet: the first must begin within the head deadline of the
    // accept, a later one within the idle timeout of the last response. Closed quietly.
    const bool first = conn->served == 0;
    const int64_t since = first ? conn->accepted_ms : conn->last_active_ms;
    if (now - since > (first ? options_.head_timeout_ms : options_.idle_timeout_ms)) {
      to_close->push_back(conn);
    }
    return;
  }
  if (!parser.headers_complete()) {
    if (now - conn->head_started_ms > options_.head_timeout_ms) {
      why = absl::StrCat("the request head did not arrive within ", options_.head_timeout_ms,
                         " ms");
    }
  } else {
    const int64_t elapsed = now - conn->head_done_ms;
    if (elapsed > options_.body_timeout_ms) {
      why = absl::StrCat("the request body did not arrive within ", options_.body_timeout_ms,
                         " ms");
    } else if (options_.min_body_bytes_per_s > 0 && elapsed > options_.body_rate_grace_ms &&
               static_cast<double>(parser.body_bytes()) <
                   static_cast<double>(options_.min_body_bytes_per_s) * elapsed / 1000.0) {
      why = absl::StrCat("the request body arrives slower than ",
                         options_.min_body_bytes_per_s, " bytes/s");
    }
  }
  if (why.empty()) return;
  // Not logged one by one: a slowloris would turn each of its connections into a line.
  ++timed_out_;
  RefuseRequest(conn, ReasonError("request_timeout", why));
}

void HttpServer::Impl::Refuse(int fd, const char* why) {
  ++refused_;
  if (options_.tls) {
    close(fd);  // no plain-text answer on a TLS port, and no handshake to spare
    return;
  }
  HttpResponse busy = ErrorResponse(WithRetryAfter(ReasonError("server_busy", why), 1000));
  busy.headers.emplace_back("Content-Length", absl::StrCat(busy.body.size()));
  busy.headers.emplace_back("Connection", "close");
  std::string bytes = StatusLineAndHeaders(busy.status, busy.headers) + "\r\n" + busy.body;
  ssize_t sent = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)sent;
  close(fd);
}

void HttpServer::Impl::Accept() {
  while (true) {
    sockaddr_in peer{};
    socklen_t peer_len = sizeof(peer);
    int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &peer_len,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: the listener stays readable, so stop watching it for a
        // moment instead of spinning (the pending connections wait in the backlog).
        accept_paused_until_ms_ = NowMs() + 100;
        epoll_event ev{};
        ev.events = 0;
        ev.data.u64 = 0;
        epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
      }
      return;
    }
    const uint32_t address = peer.sin_addr.s_addr;
    // The address's own cap first: a peer it refuses must not make anyone else give up a
    // place (found in review).
    if (options_.max_connections_per_peer > 0) {
      auto it = per_peer_.find(address);
      if (it != per_peer_.end() && it->second >= options_.max_connections_per_peer) {
        Refuse(fd, "too many open connections from this address");
        continue;
      }
    }
    if (conns_.size() >= options_.max_connections && waiting_head_.empty()) {
      // Responses a writer ended on its own thread (the loop is told at its next tick)
      // leave their connections waiting for a head too.
      std::vector<std::shared_ptr<Conn>> ended;
      for (auto& [id, conn] : conns_) {
        if (!conn->handling) continue;
        std::lock_guard<std::mutex> lock(conn->mu);
        if (conn->ended_by_writer) ended.push_back(conn);
      }
      for (auto& conn : ended) {
        if (conn->fd >= 0) Service(conn);
      }
    }
    if (conns_.size() >= options_.max_connections) {
      // A refused request's connection, draining, makes room first (found by a red team:
      // keyless requests refused at once and held open for the drain filled the table,
      // and they were the one kind nothing evicted): the one whose drain began first.
      std::shared_ptr<Conn> refused;
      for (auto& [id, conn] : conns_) {
        if (conn->draining && (!refused || conn->drain_until_ms < refused->drain_until_ms)) refused = conn;
      }
      if (refused) {
        ++evicted_;
        Close(refused);
      }
    }
    if (conns_.size() >= options_.max_connections && !waiting_head_.empty()) {
      auto victim = conns_.find(*waiting_head_.begin());
      if (victim != conns_.end()) {
        ++evicted_;
        std::shared_ptr<Conn> evicted = victim->second;  // Close erases the entry
        Close(evicted);
      } else {
        waiting_head_.erase(waiting_head_.begin());
      }
    }
    if (conns_.size() >= options_.max_connections) {
      // No connection waits for a head: the one whose response has stood still the
      // longest (a client that does not read) makes room (found by a red team: 4,096
      // keyless connections pipelining GET /metrics and never reading held them all).
      const int64_t now = NowMs();
      std::shared_ptr<Conn> stalled;
      int64_t oldest = now - kEvictStalledAfterMs;
      for (auto& [id, conn] : conns_) {
        if (!conn->handling || conn->draining) continue;
        std::lock_guard<std::mutex> lock(conn->mu);
        if (conn->out_offset < conn->out.size() && conn->output_moved_ms < oldest) {
          oldest = conn->output_moved_ms;
          stalled = conn;
        }
      }
      if (stalled) {
        ++evicted_;
        Close(stalled);
      }
    }
    if (conns_.size() >= options_.max_connections) {
      Refuse(fd, "too many open connections");
      continue;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto conn = std::make_shared<Conn>();
    conn->transport = options_.tls ? options_.tls->NewServerTransport(fd) : NewPlainTransport(fd);
    if (!conn->transport) {
      close(fd);
      continue;
    }
    conn->parser = std::make_unique<RequestParser>(options_.limits);
    conn->id = next_id_++;
    conn->fd = fd;
    conn->peer = address;
    conn->last_active_ms = conn->accepted_ms = conn->head_started_ms = NowMs();
    conns_[conn->id] = conn;
    waiting_head_.insert(conn->id);
    ++per_peer_[address];
    conn_count_ = conns_.size();
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.u64 = conn->id;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  }
}

void HttpServer::Impl::OnReadable(const std::shared_ptr<Conn>& conn) {
  char buf[65536];
  conn->read_wants_write = false;
  while (true) {
    IoResult r = conn->transport->Read(buf, sizeof(buf));
    if (r.bytes > 0) {
      if (conn->draining) {
        conn->drained_bytes += r.bytes;
        if (conn->drained_bytes > kMaxDrainBytes) {
          Close(conn);
          return;
        }
      } else if (!conn->handling && conn->in.empty()) {
        // The common case: parsed straight from the read buffer, nothing kept.
        std::unique_ptr<HttpRequest> ready;
        size_t used = Consume(conn, absl::string_view(buf, r.bytes), &ready);
        if (conn->fd < 0) return;
        if (used < r.bytes && !conn->draining) conn->in.append(buf + used, r.bytes - used);
        if (ready) Dispatch(conn, std::move(ready));
      } else {
        // A client may pipeline, but while a request is being answered at most
        // kPipelinedBytes of what follows are buffered: then reading stops (the rest
        // waits in the kernel, and TCP slows the client) until the response ends.
        conn->in.append(buf, r.bytes);
        if (conn->handling && conn->in.size() >= kPipelinedBytes) {
          if (options_.tls) {
            // A TLS write may need a read (EPOLLIN stays armed for it): no pause, and a
            // client that pipelines far ahead of its answers is disconnected.
            if (conn->in.size() > 4 * kPipelinedBytes) {
              Close(conn);
              return;
            }
          } else {
            SetReadsPaused(conn, true);
            break;
          }
        }
      }
      // A short read took all the socket held; epoll (level-triggered) reports more.
      // Saves the read that would only say EAGAIN. TLS may hold decrypted bytes.
      if (r.bytes < sizeof(buf) && !conn->transport->Buffers()) break;
      continue;
    }
    if (r.closed) {  // the peer closed (or half-closed) its side, or TLS failed
      if (options_.tls && !r.error.empty()) {
        Log(LogLevel::kInfo, "http.tls_failed",
            {{"conn", absl::StrCat(conn->id)}, {"error", r.error}});
      }
      Close(conn);
      return;
    }
    // Waiting. A TLS read that needs to write first is resumed on EPOLLOUT.
    if (r.wait == IoResult::Wait::kWritable) {
      conn->read_wants_write = true;
      UpdateInterest(conn, true);
    }
    break;
  }
}

size_t HttpServer::Impl::Consume(const std::shared_ptr<Conn>& conn, absl::string_view data,
                                 std::unique_ptr<HttpRequest>* ready) {
  RequestParser& parser = *conn->parser;
  size_t pos = 0;
  while (true) {
    const bool was_started = parser.started();
    RequestParser::Step step = parser.Feed(data.substr(pos));
    pos += step.consumed;
    if (!was_started && parser.started() && conn->served > 0) conn->head_started_ms = NowMs();
    switch (step.event) {
      case RequestParser::Event::kNeedMore:
        if (!ChargeBody(conn)) return data.size();
        return pos;
      case RequestParser::Event::kHeadersComplete: {
        conn->head_done_ms = NowMs();
        waiting_head_.erase(conn->id);
        if (options_.on_headers) {
          std::string key;
          absl::Status verdict = options_.on_headers(parser.request(), &key);
          if (verdict.ok() && !key.empty()) {
            size_t& reading = bodies_by_key_[key].count;
            if (reading >= options_.max_bodies_per_key) {
              verdict = ReasonError(
                  "server_busy", absl::StrCat(reading, " requests of this key are sending "
                                              "their bodies; at most ",
                                              options_.max_bodies_per_key, " at once"));
            } else {
              ++reading;
              conn->body_key = std::move(key);
            }
          }
          if (!verdict.ok()) {
            RefuseRequest(conn, verdict);
            return data.size();
          }
        }
        if (parser.expect_continue() && !conn->sent_continue) {
          conn->sent_continue = true;
          std::lock_guard<std::mutex> lock(conn->mu);
          conn->out.append("HTTP/1.1 100 Continue\r\n\r\n");
        }
        continue;
      }
      case RequestParser::Event::kComplete:
        ReleaseBodyPlace(*conn);
        *ready = std::make_unique<HttpRequest>(parser.TakeRequest());
        return pos;
      case RequestParser::Event::kError:
        RefuseRequest(conn, parser.error());
        return data.size();
    }
  }
}

bool HttpServer::Impl::ChargeBody(const std::shared_ptr<Conn>& conn) {
  const size_t held = conn->parser->body_bytes();
  if (held <= conn->body_charged) return true;
  const size_t more = held - conn->body_charged;
  conn->body_charged = held;
  body_bytes_ += more;
  size_t key_bytes = 0;
  if (!conn->body_key.empty()) key_bytes = bodies_by_key_[conn->body_key].bytes += more;
  absl::Status over;
  if (key_bytes > options_.max_body_bytes_per_key) {
    over = ReasonError("server_busy", absl::StrCat("the bodies this key is sending hold more than ",
                                                   options_.max_body_bytes_per_key, " bytes"));
  } else if (body_bytes_ > options_.max_body_bytes_in_all) {
    over = ReasonError("server_busy", absl::StrCat("the bodies being received hold more than ",
                                                   options_.max_body_bytes_in_all, " bytes"));
  }
  if (over.ok()) return true;
  RefuseRequest(conn, over);
  return false;
}

void HttpServer::Impl::ReleaseBodyPlace(Conn& conn) {
  body_bytes_ -= std::min(body_bytes_, conn.body_charged);
  if (!conn.body_key.empty()) {
    auto it = bodies_by_key_.find(conn.body_key);
    if (it != bodies_by_key_.end()) {
      it->second.bytes -= std::min(it->second.bytes, conn.body_charged);
      if (--it->second.count == 0) bodies_by_key_.erase(it);
    }
    conn.body_key.clear();
  }
  conn.body_charged = 0;
}

void HttpServer::Impl::RefuseRequest(const std::shared_ptr<Conn>& conn,
                                     const absl::Status& status) {
  ReleaseBodyPlace(*conn);
  conn->handling = true;
  conn->sent_continue = false;
  conn->draining = true;
  conn->drain_until_ms = NowMs() + kDrainMs;
  conn->in.clear();
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(conn->mu);
    generation = ++conn->generation;
    conn->response = Conn::Response::kNone;
    conn->keep_alive = false;
    conn->input_buffered = false;
  }
  ConnWriter writer(this, conn, generation);
  writer.Send(ErrorResponse(status));
  // Nothing more is parsed on this connection: what its parser holds (a body being
  // received) is freed now, not when the drain ends.
  conn->parser = std::make_unique<RequestParser>(options_.limits);
}

void HttpServer::Impl::TryParse(const std::shared_ptr<Conn>& conn) {
  if (conn->fd < 0 || conn->handling || conn->in.empty()) return;
  std::unique_ptr<HttpRequest> ready;
  size_t used = Consume(conn, conn->in, &ready);
  if (conn->draining) {
    conn->in.clear();
    return;
  }
  conn->in.erase(0, used);
  if (ready) Dispatch(conn, std::move(ready));
}

void HttpServer::Impl::Dispatch(const std::shared_ptr<Conn>& conn,
                                std::unique_ptr<HttpRequest> request) {
  conn->handling = true;
  conn->sent_continue = false;
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(conn->mu);
    generation = ++conn->generation;
    conn->response = Conn::Response::kNone;
    conn->keep_alive = request->keep_alive;
    conn->input_buffered = !conn->in.empty();  // a pipelined request waits for the loop
  }
  auto writer = std::make_shared<ConnWriter>(this, conn, generation);
  if (options_.run_on_loop && options_.run_on_loop(*request)) {
    handler_(std::move(*request), std::move(writer));
    return;
  }
  std::shared_ptr<HttpRequest> shared(std::move(request));
  std::function<void()> task = [this, shared, writer]() mutable {
    handler_(std::move(*shared), std::move(writer));
  };
  pool_->Run(std::move(task));
}

void HttpServer::Impl::Service(const std::shared_ptr<Conn>& conn) {
  if (conn->write_shut) return;  // draining: only reads and the drain deadline matter
  bool want_write = false, finished = false, close_now = false;
  {
    std::lock_guard<std::mutex> lock(conn->mu);
    if (conn->closed) return;
    conn->input_buffered = !conn->in.empty();
    // A TLS write retried after WANT_READ/WANT_WRITE sees the same bytes at the same
    // offset, maybe at a new address and with more after them (SSL_MODE_ACCEPT_MOVING_
    // WRITE_BUFFER): `out` only grows until all of it is sent.
    while (conn->out_offset < conn->out.size()) {
      IoResult w = conn->transport->Write(conn->out.data() + conn->out_offset,
                                          conn->out.size() - conn->out_offset);
      if (w.bytes > 0) {
        conn->out_offset += w.bytes;
        conn->output_moved_ms = NowMs();
        continue;
      }
      if (w.closed) {
        close_now = true;  // EPIPE, ECONNRESET, a TLS failure, ...
      } else if (w.wait == IoResult::Wait::kWritable) {
        want_write = true;
      }
      // kReadable (TLS): EPOLLIN is always armed; the next readable event runs Service.
      break;
    }
    if (conn->out_offset == conn->out.size()) {
      conn->out.clear();
      conn->out_offset = 0;
    }
    if (conn->overflow) close_now = true;
    if (!close_now && !want_write && conn->handling &&
        conn->response == Conn::Response::kDone) {
      finished = true;
      conn->ended_by_writer = false;
      if (!conn->keep_alive) close_now = true;
      conn->on_close = nullptr;  // the response ended: nothing to cancel any more
    }
  }
  if (close_now && conn->draining && !options_.tls && !conn->overflow) {
    // The answer to a refused request is out: shut the write side and discard what the
    // client still sends until it closes or the drain ends (a close with unread input
    // would reset the connection, and the client could lose the answer).
    shutdown(conn->fd, SHUT_WR);
    conn->write_shut = true;
    UpdateInterest(conn, false);
    return;
  }
  if (close_now) {
    Close(conn);
    return;
  }
  UpdateInterest(conn, want_write || conn->read_wants_write);
  if (finished) {
    conn->handling = false;
    conn->last_active_ms = NowMs();
    ++conn->served;
    waiting_head_.insert(conn->id);
    TryParse(conn);  // a pipelined request may be waiting
    if (conn->fd >= 0 && conn->reads_paused &&
        (!conn->handling || conn->in.size() < kPipelinedBytes)) {
      SetReadsPaused(conn, false);
    }
  }
}

void HttpServer::Impl::SetReadsPaused(const std::shared_ptr<Conn>& conn, bool paused) {
  if (conn->reads_paused == paused) return;
  conn->reads_paused = paused;
  epoll_event ev{};
  ev.events = (paused ? 0u : (EPOLLIN | EPOLLRDHUP)) | (conn->watching_writable ? EPOLLOUT : 0u);
  ev.data.u64 = conn->id;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, conn->fd, &ev);
}

void HttpServer::Impl::UpdateInterest(const std::shared_ptr<Conn>& conn, bool want_write) {
  if (want_write == conn->watching_writable) return;  // unchanged: no system call
  conn->watching_writable = want_write;
  epoll_event ev{};
  ev.events = (conn->reads_paused ? 0u : (EPOLLIN | EPOLLRDHUP)) | (want_write ? EPOLLOUT : 0u);
  ev.data.u64 = conn->id;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, conn->fd, &ev);
}

void HttpServer::Impl::Close(const std::shared_ptr<Conn>& conn) {
  if (conn->fd < 0) return;
  std::function<void()> on_close;
  {
    std::lock_guard<std::mutex> lock(conn->mu);
    conn->closed = true;
    on_close = std::move(conn->on_close);
    conn->on_close = nullptr;
  }
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, conn->fd, nullptr);
  conn->transport->Shutdown();
  conn->transport.reset();
  close(conn->fd);
  conn->fd = -1;
  conns_.erase(conn->id);
  waiting_head_.erase(conn->id);
  ReleaseBodyPlace(*conn);
  auto peer = per_peer_.find(conn->peer);
  if (peer != per_peer_.end() && --peer->second == 0) per_peer_.erase(peer);
  conn_count_ = conns_.size();
  if (on_close) on_close();
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() { Stop(); }

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(HttpServerOptions options,
                                                              Handler handler) {
  auto impl = std::make_unique<Impl>(std::move(options), std::move(handler));
  absl::Status status = impl->Start();
  if (!status.ok()) return status;
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

int HttpServer::port() const { return impl_->port(); }
void HttpServer::Stop() { impl_->Stop(); }
size_t HttpServer::connection_count() const { return impl_->connection_count(); }
uint64_t HttpServer::refused_connections() const { return impl_->refused(); }
uint64_t HttpServer::evicted_connections() const { return impl_->evicted(); }
uint64_t HttpServer::timed_out_requests() const { return impl_->timed_out(); }
double HttpServer::loop_cpu_seconds() const { return impl_->loop_cpu_seconds(); }

}  // namespace gantry::http
