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
namespace {

// Responses in tests are small; a bound keeps a broken server from filling memory.
constexpr size_t kMaxHeaderBytes = 1 << 20;
constexpr size_t kMaxBodyBytes = 256u << 20;

}  // namespace

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

absl::StatusOr<TestResponse> TestHttpClient::ReadResponse(
    int timeout_ms, const std::function<bool(absl::string_view)>& on_chunk) {
  ResponseParser parser(kMaxHeaderBytes, kMaxBodyBytes);
  parser.on_chunk = on_chunk;
  while (true) {
    auto used = parser.Feed(buffer_);
    if (!used.ok()) return used.status();
    buffer_.erase(0, *used);
    if (parser.complete() || parser.stopped()) return parser.TakeResponse();
    absl::Status more = Fill(timeout_ms);
    if (absl::IsUnavailable(more) && parser.headers_complete()) {
      // Closed: whole only if the body runs to the close.
      absl::Status finished = parser.Finish();
      if (!finished.ok()) return finished;
      return parser.TakeResponse();
    }
    if (!more.ok()) return more;
  }
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
