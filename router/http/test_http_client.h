// Test-only: a tiny blocking HTTP/1.1 client over a real TCP socket, for router tests,
// optionally over TLS (OpenSSL's client, verifying the server against a CA file).
// It sends raw bytes (so tests can send malformed or pipelined requests) and reads
// responses, de-chunking streamed bodies and reporting each chunk as it arrives.
//
// Thread-safety: one object per thread.
#ifndef GANTRY_ROUTER_HTTP_TEST_HTTP_CLIENT_H_
#define GANTRY_ROUTER_HTTP_TEST_HTTP_CLIENT_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "router/http/http_response_parser.h"

namespace gantry::http {

using TestResponse = ReceivedResponse;  // http_response_parser.h

class TestHttpClient {
 public:
  // Connects to 127.0.0.1:port. Errors: UNAVAILABLE.
  static absl::StatusOr<TestHttpClient> Connect(int port);
  // Connects and completes a TLS handshake, verifying the certificate against `ca_file`
  // for the address 127.0.0.1. `max_version` (e.g. TLS1_1_VERSION; 0: no limit) lets a
  // test offer only old protocols. Errors: UNAVAILABLE (connect, handshake refused).
  static absl::StatusOr<TestHttpClient> ConnectTls(int port, const std::string& ca_file,
                                                   int max_version = 0);
  // One request on a new connection: POST of the JSON `body` to `target` with
  // "Authorization: Bearer <api_key>", and its whole response. Errors: as Connect,
  // SendRequest and ReadResponse.
  static absl::StatusOr<TestResponse> PostJson(int port, absl::string_view target,
                                               absl::string_view body,
                                               absl::string_view api_key,
                                               int timeout_ms = 10000);
  TestHttpClient(TestHttpClient&& other) noexcept;
  TestHttpClient& operator=(TestHttpClient&& other) noexcept;
  ~TestHttpClient();

  absl::Status SendRaw(absl::string_view bytes);
  // Sends a request with Host, Content-Length (when there is a body) and `headers`.
  absl::Status SendRequest(absl::string_view method, absl::string_view target,
                           absl::string_view body,
                           const std::vector<std::pair<std::string, std::string>>& headers = {});
  // Reads one whole response. `on_chunk`, when given, sees each chunk of a chunked body
  // as it arrives and may return false to stop reading (the response is then partial).
  // Errors: DEADLINE_EXCEEDED after `timeout_ms`; UNAVAILABLE when the server closed
  // the connection before a whole response; DATA_LOSS for a malformed response.
  absl::StatusOr<TestResponse> ReadResponse(
      int timeout_ms = 10000, const std::function<bool(absl::string_view)>& on_chunk = nullptr);
  // Whether the server closed the connection (reads EOF within `timeout_ms`).
  bool WaitForClose(int timeout_ms);
  void Close();
  // Hands the connected socket to the caller, after which this object is closed. Plain
  // connections only: under TLS it returns -1 and keeps the connection; -1 when closed.
  int ReleaseFd();

 private:
  explicit TestHttpClient(int fd) : fd_(fd) {}
  // recv/send on the socket, or SSL_read/SSL_write when TLS is on.
  long RecvSome(char* buffer, size_t size);
  long SendSome(const char* data, size_t size);
  // Whether bytes wait without polling the socket (decrypted, inside OpenSSL).
  bool Pending() const;
  absl::Status Fill(int timeout_ms);  // reads more bytes into buffer_

  int fd_ = -1;
  void* ssl_ = nullptr;  // SSL*, owned; OpenSSL stays out of this header
  std::string buffer_;
};

// Parses an SSE body into the payloads of its "data: " lines, in order.
std::vector<std::string> SseDataLines(absl::string_view body);

}  // namespace gantry::http

#endif  // GANTRY_ROUTER_HTTP_TEST_HTTP_CLIENT_H_
