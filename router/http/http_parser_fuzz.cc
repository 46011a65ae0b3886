// Fuzz target: the HTTP/1.1 request parser (bytes from any TCP client).
// Invariants: never crashes; a complete parse consumes at least one byte and no more
// than given; parsing a buffer split into pipelined requests always makes progress; a
// prefix of an input that parses completely is either incomplete or parses the same
// request (no request is decided before its bytes arrived).
#include <cstdint>
#include <cstdlib>
#include <string>

#include "router/http/http_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gantry::http;
  HttpLimits limits;
  limits.max_body_bytes = 4096;
  limits.max_header_bytes = 2048;
  limits.max_request_line_bytes = 512;
  limits.max_header_count = 16;
  std::string buffer(reinterpret_cast<const char*>(data), size);
  absl::string_view rest(buffer);
  for (int i = 0; i < 64 && !rest.empty(); ++i) {
    HttpRequest request;
    ParseOutcome outcome = ParseHttpRequest(rest, limits, &request);
    if (outcome.state != ParseState::kComplete) break;
    if (outcome.consumed == 0 || outcome.consumed > rest.size()) std::abort();
    if (request.body.size() > limits.max_body_bytes) std::abort();
    // Prefix consistency, at one split point chosen from the input.
    size_t cut = outcome.consumed / 2;
    HttpRequest partial;
    ParseOutcome early = ParseHttpRequest(rest.substr(0, cut), limits, &partial);
    if (early.state == ParseState::kComplete &&
        (early.consumed != outcome.consumed || partial.body != request.body)) {
      // Only possible for a request without a body that ends within the prefix.
      if (cut < outcome.consumed) std::abort();
    }
    rest.remove_prefix(outcome.consumed);
  }
  return 0;
}
