#include "harness-svc/http_client.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status.h"

namespace gantry::harness {
namespace {

using Clock = std::chrono::steady_clock;

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

// Status line and headers (without the blank line).
absl::Status ParseHead(absl::string_view head, HttpResponse* resp, bool* chunked, int64_t* length) {
  std::vector<absl::string_view> lines = absl::StrSplit(head, "\r\n");
  std::vector<absl::string_view> status_line = absl::StrSplit(lines[0], absl::MaxSplits(' ', 2));
  if (status_line.size() < 2 || !absl::StartsWith(status_line[0], "HTTP/1.") ||
      !absl::SimpleAtoi(status_line[1], &resp->status)) {
    return Err(absl::StatusCode::kDataLoss, "protocol_error", "malformed status line");
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    size_t c = lines[i].find(':');
    if (c == absl::string_view::npos) return Err(absl::StatusCode::kDataLoss, "protocol_error", "malformed header");
    std::string name = absl::AsciiStrToLower(lines[i].substr(0, c));
    std::string value(absl::StripAsciiWhitespace(lines[i].substr(c + 1)));
    if (name == "transfer-encoding" && absl::StrContains(absl::AsciiStrToLower(value), "chunked")) *chunked = true;
    if (name == "content-length" && !absl::SimpleAtoi(value, length)) {
      return Err(absl::StatusCode::kDataLoss, "protocol_error", "bad Content-Length");
    }
    resp->headers.emplace_back(std::move(name), std::move(value));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ChunkedBodyDecoder::Feed(absl::string_view received) {
  while (!done_) {
    size_t eol = received.find("\r\n", pos_);
    if (eol == absl::string_view::npos) return absl::OkStatus();  // the size line is incomplete
    absl::string_view size_text = received.substr(pos_, eol - pos_);
    size_text = size_text.substr(0, size_text.find(';'));
    uint64_t size = 0;
    if (!absl::SimpleHexAtoi(absl::StripAsciiWhitespace(size_text), &size) || size > max_bytes_) {
      return Err(absl::StatusCode::kDataLoss, "protocol_error", "bad chunk size");
    }
    if (size == 0) {
      done_ = true;
      break;
    }
    if (eol + 2 + size + 2 > received.size()) return absl::OkStatus();  // the chunk is incomplete
    body_.append(received.data() + eol + 2, size);
    pos_ = eol + 2 + size + 2;
  }
  return absl::OkStatus();
}

std::string HttpResponse::Header(absl::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k == name) return v;
  }
  return "";
}

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
  std::string in;
  char buf[65536];
  HttpResponse resp;
  size_t head_end = std::string::npos;
  bool chunked = false;
  int64_t length = -1;
  ChunkedBodyDecoder chunks(request.max_response_bytes);
  size_t body_seen = 0;  // bytes of body passed to on_body so far
  for (;;) {
    pollfd p{sock.fd, POLLIN, 0};
    int left = Remaining(deadline);
    if (left == 0 || ::poll(&p, 1, left) <= 0) {
      return Err(absl::StatusCode::kDeadlineExceeded, "deadline_exceeded", "no complete response in time");
    }
    ssize_t n = ::recv(sock.fd, buf, sizeof buf, 0);
    if (n < 0) return Err(absl::StatusCode::kUnavailable, "unavailable", std::strerror(errno));
    if (n == 0) break;
    in.append(buf, static_cast<size_t>(n));
    if (in.size() > request.max_response_bytes) {
      return Err(absl::StatusCode::kDataLoss, "protocol_error", "response too large");
    }
    if (head_end == std::string::npos) {
      head_end = in.find("\r\n\r\n");
      if (head_end == std::string::npos) continue;
      GANTRY_RETURN_IF_ERROR(ParseHead(absl::string_view(in).substr(0, head_end), &resp, &chunked, &length));
    }
    absl::string_view body = absl::string_view(in).substr(head_end + 4);
    if (chunked) GANTRY_RETURN_IF_ERROR(chunks.Feed(body));
    if (request.on_body) {
      absl::string_view so_far = chunked ? absl::string_view(chunks.body()) : body;
      if (so_far.size() > body_seen) {
        body_seen = so_far.size();
        request.on_body(so_far);
      }
    }
  }
  if (head_end == std::string::npos) {
    return Err(absl::StatusCode::kUnavailable, "unavailable", "connection closed before a whole response");
  }
  absl::string_view body = absl::string_view(in).substr(head_end + 4);
  if (chunked) {
    if (!chunks.done()) return Err(absl::StatusCode::kDataLoss, "protocol_error", "truncated chunked body");
    resp.body = chunks.body();
  } else if (length >= 0) {
    if (body.size() < static_cast<size_t>(length)) {
      return Err(absl::StatusCode::kUnavailable, "unavailable", "connection closed inside the body");
    }
    resp.body = std::string(body.substr(0, static_cast<size_t>(length)));
  } else {
    resp.body = std::string(body);
  }
  return resp;
}

}  // namespace gantry::harness
