// A small blocking HTTP/1.1 client for the harness's calls to the router: one request
// per connection ("Connection: close"), plain TCP, bounded response size and a
// deadline for the whole exchange. A streamed body (SSE) can be watched as it arrives
// (HttpRequest::on_body); the call still returns the whole response.
//
// Thread-safety: the function is thread-safe (no shared state).
#ifndef GANTRY_HARNESS_SVC_HTTP_CLIENT_H_
#define GANTRY_HARNESS_SVC_HTTP_CLIENT_H_

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gantry::harness {

struct HttpResponse {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // names lowercased
  std::string body;                                          // de-chunked
  std::string Header(absl::string_view lowercase_name) const;
};

struct HttpRequest {
  std::string method = "POST";
  std::string url;  // "http://host:port/path"
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  int timeout_ms = 60000;
  size_t max_response_bytes = 64u << 20;
  // Optional: called on the calling thread after each read that added to the body,
  // with the whole body received so far (de-chunked; complete chunks only).
  std::function<void(absl::string_view body_so_far)> on_body;
};

// Decodes a chunked HTTP/1.1 body as it arrives. Feed() takes everything received
// after the header so far (the same prefix, growing) and appends newly complete chunks
// to body(). Errors: DATA_LOSS "protocol_error" for a malformed chunk size or one larger
// than `max_bytes`.
class ChunkedBodyDecoder {
 public:
  explicit ChunkedBodyDecoder(size_t max_bytes) : max_bytes_(max_bytes) {}
  absl::Status Feed(absl::string_view received);
  // Whether the last (zero-size) chunk was seen.
  bool done() const { return done_; }
  const std::string& body() const { return body_; }

 private:
  size_t max_bytes_;
  size_t pos_ = 0;
  bool done_ = false;
  std::string body_;
};

// Errors: INVALID_ARGUMENT (a URL that is not http://host[:port]/path), UNAVAILABLE
// (cannot connect, connection closed early), DEADLINE_EXCEEDED, DATA_LOSS (malformed
// or oversized response).
absl::StatusOr<HttpResponse> SendHttp(const HttpRequest& request);

}  // namespace gantry::harness

#endif  // GANTRY_HARNESS_SVC_HTTP_CLIENT_H_
