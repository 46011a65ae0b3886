// A small blocking HTTP/1.1 client for the harness's calls to the router: one request
// per connection ("Connection: close"), plain TCP, bounded response size and a
// deadline for the whole exchange. Enough for non-streamed OpenAI chat completions.
//
// Thread-safety: the function is thread-safe (no shared state).
#ifndef GANTRY_HARNESS_SVC_HTTP_CLIENT_H_
#define GANTRY_HARNESS_SVC_HTTP_CLIENT_H_

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

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
};

// Errors: INVALID_ARGUMENT (a URL that is not http://host[:port]/path), UNAVAILABLE
// (cannot connect, connection closed early), DEADLINE_EXCEEDED, DATA_LOSS (malformed
// or oversized response).
absl::StatusOr<HttpResponse> SendHttp(const HttpRequest& request);

}  // namespace gantry::harness

#endif  // GANTRY_HARNESS_SVC_HTTP_CLIENT_H_
