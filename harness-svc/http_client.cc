#include "harness-svc/http_client.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace gantry::harness {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxHeaderBytes = 64 << 10;

absl::Status Err(absl::StatusCode code, absl::string_view reason, absl::string_view msg) {
  return Error(code, reason, msg);
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

int Remaining(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

}  // namespace

absl::StatusOr<HttpResponse> SendHttp(const HttpRequest& request) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(request.timeout_ms);
  absl::string_view url = request.url;
  if (!absl::ConsumePrefix(&url, "http://")) {
    return Err(absl::StatusCode::kInvalidArgument, "invalid_request", "only http:// URLs are supported");
  }
  size_t slash = url.find('/');
  absl::string_view authority = url.substr(0, slash);
  std::string target = slash == absl::string_view::npos ? "/" : std::string(url.substr(slash));
  std::string host(authority), port = "80";
  size_t colon = authority.rfind(':');
  if (colon != absl::string_view::npos) {
    host = std::string(authority.substr(0, colon));
    port = std::string(authority.substr(colon + 1));
  }
  if (host.empty() || port.empty()) {
    return Err(absl::StatusCode::kInvalidArgument, "invalid_request", absl::StrCat("bad URL '", request.url, "'"));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0 || res == nullptr) {
    return Err(absl::StatusCode::kUnavailable, "unavailable", absl::StrCat("cannot resolve ", host));
  }
  Fd sock;
  sock.fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int rc = sock.fd < 0 ? -1 : ::connect(sock.fd, res->ai_addr, res->ai_addrlen);
  ::freeaddrinfo(res);
  if (rc != 0) {
    return Err(absl::StatusCode::kUnavailable, "unavailable",
               absl::StrCat("cannot connect to ", host, ":", port, ": ", std::strerror(errno)));
  }
  std::string out = absl::StrCat(request.method, " ", target, " HTTP/1.1\r\nHost: ", host, ":", port,
                                 "\r\nConnection: close\r\nContent-Length: ", request.body.size(), "\r\n");
  for (const auto& [k, v] : request.headers) absl::StrAppend(&out, k, ": ", v, "\r\n");
  absl::StrAppend(&out, "\r\n", request.body);
  size_t sent = 0;
  while (sent < out.size()) {
    pollfd p{sock.fd, POLLOUT, 0};
    if (::poll(&p, 1, Remaining(deadline)) <= 0) {
      return Err(absl::StatusCode::kDeadlineExceeded, "deadline_exceeded", "sending the request timed out");
    }
    ssize_t n = ::send(sock.fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return Err(absl::StatusCode::kUnavailable, "unavailable", "the server closed the connection");
    sent += static_cast<size_t>(n);
  }
  char buf[65536];
  http::ResponseParser parser(kMaxHeaderBytes, request.max_response_bytes);
  size_t body_seen = 0;  // bytes of body passed to on_body so far
  while (!parser.complete()) {
    pollfd p{sock.fd, POLLIN, 0};
    int left = Remaining(deadline);
    if (left == 0 || ::poll(&p, 1, left) <= 0) {
      return Err(absl::StatusCode::kDeadlineExceeded, "deadline_exceeded", "no complete response in time");
    }
    ssize_t n = ::recv(sock.fd, buf, sizeof buf, 0);
    if (n < 0) return Err(absl::StatusCode::kUnavailable, "unavailable", std::strerror(errno));
    if (n == 0) {
      GANTRY_RETURN_IF_ERROR(parser.Finish());
      break;
    }
    GANTRY_RETURN_IF_ERROR(parser.Feed(absl::string_view(buf, static_cast<size_t>(n))).status());
    const std::string& body = parser.response().body;
    if (request.on_body && parser.headers_complete() && body.size() > body_seen) {
      body_seen = body.size();
      request.on_body(body);
    }
  }
  return parser.TakeResponse();
}

}  // namespace gantry::harness
