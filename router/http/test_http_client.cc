#include "router/http/test_http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace gantry::http {

std::string TestResponse::Header(absl::string_view lowercase_name) const {
  for (const auto& [name, value] : headers) {
    if (name == lowercase_name) return value;
  }
  return "";
}

absl::StatusOr<TestHttpClient> TestHttpClient::Connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("connect: ", strerror(errno)));
  }
  return TestHttpClient(fd);
}

absl::StatusOr<TestResponse> TestHttpClient::PostJson(int port, absl::string_view target,
                                                      absl::string_view body,
                                                      absl::string_view api_key,
                                                      int timeout_ms) {
  auto client = Connect(port);
  if (!client.ok()) return client.status();
  absl::Status sent = client->SendRequest(
      "POST", target, body,
      {{"Content-Type", "application/json"}, {"Authorization", absl::StrCat("Bearer ", api_key)}});
  if (!sent.ok()) return sent;
  return client->ReadResponse(timeout_ms);
}

absl::StatusOr<TestHttpClient> TestHttpClient::ConnectTls(int port, const std::string& ca_file,
                                                          int max_version) {
  auto client = Connect(port);
  if (!client.ok()) return client.status();
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  if (max_version != 0) {
    SSL_CTX_set_min_proto_version(ctx, 0);
    SSL_CTX_set_max_proto_version(ctx, max_version);
    SSL_CTX_set_security_level(ctx, 0);  // let this OpenSSL offer what it would refuse
  }
  SSL_CTX_load_verify_locations(ctx, ca_file.c_str(), nullptr);
  SSL* ssl = SSL_new(ctx);
  SSL_CTX_free(ctx);  // the SSL holds a reference
  X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), "127.0.0.1");
  SSL_set_fd(ssl, client->fd_);
  client->ssl_ = ssl;
  ERR_clear_error();
  if (SSL_connect(ssl) != 1) {
    char why[256];
    ERR_error_string_n(ERR_get_error(), why, sizeof(why));
    return absl::UnavailableError(absl::StrCat("TLS handshake: ", why));
  }
  return client;
}

long TestHttpClient::RecvSome(char* buffer, size_t size) {
  if (ssl_ == nullptr) return recv(fd_, buffer, size, 0);
  int n = SSL_read(static_cast<SSL*>(ssl_), buffer, static_cast<int>(size));
  return n > 0 ? n : -1;
}

long TestHttpClient::SendSome(const char* data, size_t size) {
  if (ssl_ == nullptr) return send(fd_, data, size, MSG_NOSIGNAL);
  int n = SSL_write(static_cast<SSL*>(ssl_), data, static_cast<int>(size));
  return n > 0 ? n : -1;
}

bool TestHttpClient::Pending() const {
  return ssl_ != nullptr && SSL_pending(static_cast<SSL*>(ssl_)) > 0;
}

TestHttpClient::TestHttpClient(TestHttpClient&& other) noexcept
    : fd_(other.fd_), ssl_(other.ssl_), buffer_(std::move(other.buffer_)) {
  other.fd_ = -1;
  other.ssl_ = nullptr;
}

TestHttpClient& TestHttpClient::operator=(TestHttpClient&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = other.fd_;
    ssl_ = other.ssl_;
    buffer_ = std::move(other.buffer_);
    other.fd_ = -1;
    other.ssl_ = nullptr;
  }
  return *this;
}

TestHttpClient::~TestHttpClient() { Close(); }

int TestHttpClient::ReleaseFd() {
  if (ssl_ != nullptr) return -1;
  int fd = fd_;
  fd_ = -1;
  return fd;
}

void TestHttpClient::Close() {
  if (ssl_ != nullptr) SSL_free(static_cast<SSL*>(ssl_));
  ssl_ = nullptr;
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

absl::Status TestHttpClient::SendRaw(absl::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = SendSome(bytes.data(), bytes.size());
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return absl::UnavailableError(absl::StrCat("send: ", strerror(errno)));
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::Status TestHttpClient::SendRequest(
    absl::string_view method, absl::string_view target, absl::string_view body,
    const std::vector<std::pair<std::string, std::string>>& headers) {
  std::string out = absl::StrCat(method, " ", target, " HTTP/1.1\r\nHost: 127.0.0.1\r\n");
  for (const auto& [name, value] : headers) absl::StrAppend(&out, name, ": ", value, "\r\n");
  if (!body.empty() || method == "POST") {
    absl::StrAppend(&out, "Content-Length: ", body.size(), "\r\n");
  }
  absl::StrAppend(&out, "\r\n", body);
  return SendRaw(out);
}

absl::Status TestHttpClient::Fill(int timeout_ms) {
  pollfd pfd{fd_, POLLIN, 0};
  int ready = Pending() ? 1 : poll(&pfd, 1, timeout_ms);
  if (ready == 0) return absl::DeadlineExceededError("no response in time");
  char buf[65536];
  ssize_t n = RecvSome(buf, sizeof(buf));
  if (n <= 0) return absl::UnavailableError("connection closed by the server");
  buffer_.append(buf, static_cast<size_t>(n));
  return absl::OkStatus();
}

absl::StatusOr<std::string> TestHttpClient::ReadLine(int timeout_ms) {
  while (true) {
    size_t eol = buffer_.find("\r\n");
    if (eol != std::string::npos) {
      std::string line = buffer_.substr(0, eol);
      buffer_.erase(0, eol + 2);
      return line;
    }
    absl::Status status = Fill(timeout_ms);
    if (!status.ok()) return status;
  }
}

absl::StatusOr<std::string> TestHttpClient::ReadExactly(size_t n, int timeout_ms) {
  while (buffer_.size() < n) {
    absl::Status status = Fill(timeout_ms);
    if (!status.ok()) return status;
  }
  std::string out = buffer_.substr(0, n);
  buffer_.erase(0, n);
  return out;
}

absl::StatusOr<TestResponse> TestHttpClient::ReadResponse(
    int timeout_ms, const std::function<bool(absl::string_view)>& on_chunk) {
  TestResponse response;
  while (true) {
    auto status_line = ReadLine(timeout_ms);
    if (!status_line.ok()) return status_line.status();
    std::vector<std::string> parts = absl::StrSplit(*status_line, absl::MaxSplits(' ', 2));
    if (parts.size() < 2 || !absl::SimpleAtoi(parts[1], &response.status)) {
      return absl::DataLossError(absl::StrCat("bad status line: ", *status_line));
    }
    response.headers.clear();
    while (true) {
      auto line = ReadLine(timeout_ms);
      if (!line.ok()) return line.status();
      if (line->empty()) break;
      size_t colon = line->find(':');
      if (colon == std::string::npos) return absl::DataLossError("bad header line");
      response.headers.emplace_back(
          absl::AsciiStrToLower(line->substr(0, colon)),
          std::string(absl::StripAsciiWhitespace(line->substr(colon + 1))));
    }
    if (response.status != 100) break;  // skip interim responses
  }
  if (absl::EqualsIgnoreCase(response.Header("transfer-encoding"), "chunked")) {
    response.chunked = true;
    while (true) {
      auto size_line = ReadLine(timeout_ms);
      if (!size_line.ok()) return size_line.status();
      size_t size = std::strtoul(size_line->c_str(), nullptr, 16);
      if (size == 0) {
        auto end = ReadLine(timeout_ms);
        if (!end.ok()) return end.status();
        break;
      }
      auto data = ReadExactly(size + 2, timeout_ms);
      if (!data.ok()) return data.status();
      data->resize(size);
      response.body += *data;
      if (on_chunk && !on_chunk(*data)) return response;
    }
  } else {
    size_t length = 0;
    std::string cl = response.Header("content-length");
    if (!cl.empty() && !absl::SimpleAtoi(cl, &length)) return absl::DataLossError("bad length");
    auto body = ReadExactly(length, timeout_ms);
    if (!body.ok()) return body.status();
    response.body = *body;
  }
  return response;
}

bool TestHttpClient::WaitForClose(int timeout_ms) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < until) {
    pollfd pfd{fd_, POLLIN, 0};
    if (!Pending() && poll(&pfd, 1, 50) <= 0) continue;
    char buf[4096];
    ssize_t n = RecvSome(buf, sizeof(buf));
    if (n <= 0) return true;
    buffer_.append(buf, static_cast<size_t>(n));
  }
  return false;
}

std::vector<std::string> SseDataLines(absl::string_view body) {
  std::vector<std::string> out;
  for (absl::string_view event : absl::StrSplit(body, "\n\n", absl::SkipEmpty())) {
    for (absl::string_view line : absl::StrSplit(event, '\n')) {
      if (absl::ConsumePrefix(&line, "data: ")) out.emplace_back(line);
    }
  }
  return out;
}

}  // namespace gantry::http
