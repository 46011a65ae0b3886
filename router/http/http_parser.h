// HTTP/1.1 request parsing (RFC 9112), pure and bounded, for the gateway.
//
// ParseHttpRequest() looks at the bytes a connection has buffered and either finds one
// complete request at their start (and says how many bytes it used, so that pipelined
// requests behind it stay in the buffer), or says that more bytes are needed, or fails
// with an error that the server answers and then closes the connection (after a framing
// error the stream cannot be resynchronised).
//
// What is accepted: a request line `METHOD SP request-target SP HTTP/1.x CRLF` (one
// leading empty line is ignored, RFC 9112 2.2), header fields `name: value CRLF` (token
// names, no whitespace before the colon, no obs-fold), then a body framed by
// Content-Length or by `Transfer-Encoding: chunked` (extensions and trailers read and
// discarded). Lines end in CRLF; a bare LF is an error (no request smuggling through
// lenient line endings). A request with both Content-Length and Transfer-Encoding, with
// conflicting Content-Lengths, with a transfer coding other than chunked, or (HTTP/1.1)
// without Host is rejected.
//
// Errors (each a gantry reason, see common/error_codes.cc):
//   headers_too_large (431)  request line or header section beyond the limits
//   body_too_large (413)     declared or chunked body beyond max_body_bytes; detected
//                            from Content-Length before the body arrives
//   invalid_request (400)    anything malformed
//
// The parse restarts from the buffer's start on every call; cost is linear in the
// buffered bytes, which the limits bound.
//
// Thread-safety: pure functions.
#ifndef GANTRY_ROUTER_HTTP_HTTP_PARSER_H_
#define GANTRY_ROUTER_HTTP_HTTP_PARSER_H_

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gantry::http {

struct HttpLimits {
  size_t max_request_line_bytes = 8 << 10;
  size_t max_header_bytes = 64 << 10;  // the whole header section, request line included
  size_t max_header_count = 128;
  size_t max_body_bytes = 16 << 20;    // after de-chunking
  size_t max_chunk_line_bytes = 1024;  // a chunk-size line with its extensions
};

struct HttpRequest {
  std::string method;          // case-sensitive, as sent ("GET", "POST")
  std::string target;          // as sent ("/v1/models?x=1")
  std::string path;            // target before '?'
  std::string query;           // after '?', without it; "" when none
  int version_minor = 1;       // HTTP/1.<minor>
  // Field names lowercased, values with surrounding whitespace removed, in order.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // Whether the connection stays open after the response (HTTP/1.1 unless
  // "Connection: close"; HTTP/1.0 only with "Connection: keep-alive").
  bool keep_alive = true;

  // The first value of a header (name in lowercase), or "" when absent.
  absl::string_view Header(absl::string_view lowercase_name) const;
  bool HasHeader(absl::string_view lowercase_name) const;
};

enum class ParseState { kNeedMore, kComplete, kError };

struct ParseOutcome {
  ParseState state = ParseState::kNeedMore;
  // kComplete: bytes of the buffer this request used (> 0).
  size_t consumed = 0;
  // kError: the reasoned error to answer with.
  absl::Status error;
  // kNeedMore: whether the header section is complete, and whether the client asked
  // for "100 Continue" before sending its body.
  bool headers_complete = false;
  bool expect_continue = false;
};

// Parses the request at the start of `buffer` into `*out` (overwritten). Never reads
// beyond `buffer`; never aborts on any input.
ParseOutcome ParseHttpRequest(absl::string_view buffer, const HttpLimits& limits,
                              HttpRequest* out);

}  // namespace gantry::http

#endif  // GANTRY_ROUTER_HTTP_HTTP_PARSER_H_
