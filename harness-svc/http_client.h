// A small blocking HTTP/1.1 client for the harness's calls to the router: one request
// per connection ("Connection: close"), plain TCP, bounded response size and a
// deadline for the whole exchange. Responses are parsed by router/http's
// ResponseParser (llhttp). A streamed body (SSE) can be watched as it arrives
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
#include "router/http/http_response_parser.h"

namespace gantry::harness {

// The status, headers (names lowercased) and body (de-chunked) of a response.
using HttpResponse = http::ReceivedResponse;

struct HttpRequest {
  std::string method = "POST";
  std::string url;  // "http://host:port/path"
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  int timeout_ms = 60000;
  size_t max_response_bytes = 64u << 20;
  // Optional: called on the calling thread after each read that added to the body,
  // with the whole body received so far (de-chunked; a chunk may be part-way).
  std::function<void(absl::string_view body_so_far)> on_body;
};

// Errors: INVALID_ARGUMENT (a URL that is not http://host[:port]/path), UNAVAILABLE
// (cannot connect, connection closed early), DEADLINE_EXCEEDED, DATA_LOSS (malformed
// or oversized response).
absl::StatusOr<HttpResponse> SendHttp(const HttpRequest& request);

}  // namespace gantry::harness

#endif  // GANTRY_HARNESS_SVC_HTTP_CLIENT_H_
