// HTTP/1.1 request parsing (RFC 9112), bounded, for the gateway: llhttp (Node.js's
// parser, //third_party/llhttp) under a strict profile of our own.
//
// RequestParser is incremental: the server feeds it each read as it arrives, and every
// byte is looked at once (a chunked body is decoded as it comes and appended once to the
// request's body; nothing is re-parsed). It stops after the header section (so that the
// server can refuse a request, e.g. an unknown key, before reading its body) and after
// each complete request (so that pipelined requests behind it stay with the caller).
// ParseHttpRequest() is the same parser over one buffer, for tests and tools.
//
// What is accepted: a request line `METHOD SP request-target SP HTTP/1.x CRLF` (empty
// lines before it are ignored, RFC 9112 2.2; the method one that llhttp knows), header
// fields `name: value CRLF` (token names, no whitespace before the colon, no obs-fold),
// then a body framed by Content-Length or by `Transfer-Encoding: chunked` (extensions and
// trailers read and discarded). Lines of the header section end in CRLF; a bare LF is an
// error (no request smuggling through lenient line endings), as is a bare LF in a chunk
// line. A request with both Content-Length and Transfer-Encoding, with two
// Content-Lengths, with a transfer coding other than one chunked, or (HTTP/1.1) without
// Host is rejected.
//
// Errors (each a gantry reason, see common/error_codes.cc):
//   headers_too_large (431)  request line or header section (or trailers) beyond the
//                            limits
//   body_too_large (413)     declared or chunked body beyond max_body_bytes; detected
//                            from Content-Length, or from a chunk's size line, before the
//                            body (or that chunk) arrives
//   invalid_request (400)    anything malformed
//
// Thread-safety: a RequestParser is used by one thread at a time; ParseHttpRequest is a
// pure function.
#ifndef GANTRY_ROUTER_HTTP_HTTP_PARSER_H_
#define GANTRY_ROUTER_HTTP_HTTP_PARSER_H_

#include <cstddef>
#include <memory>
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

// The incremental parser of one connection's requests, one after the other.
class RequestParser {
 public:
  explicit RequestParser(const HttpLimits& limits);
  ~RequestParser();
  RequestParser(const RequestParser&) = delete;
  RequestParser& operator=(const RequestParser&) = delete;

  enum class Event {
    kNeedMore,         // all of `data` was used; feed more
    kHeadersComplete,  // the header section is complete and valid (request() has it)
    kComplete,         // a whole request: TakeRequest()
    kError,            // error() says why; the connection cannot be resynchronised
  };
  struct Step {
    Event event = Event::kNeedMore;
    size_t consumed = 0;  // bytes of `data` used before the event
  };
  // Parses `data` up to the next event. After kComplete, call TakeRequest() before
  // feeding more; after kError, every call answers kError again.
  Step Feed(absl::string_view data);

  // The request so far: from kHeadersComplete on, everything but the body is there.
  const HttpRequest& request() const;
  // The complete request; the parser is then ready for the next one.
  HttpRequest TakeRequest();
  const absl::Status& error() const;
  // Whether some byte of the current request arrived (an empty line before it does not
  // count), whether its header section is complete, whether it asked for "100 Continue",
  // and the body bytes received so far (after de-chunking).
  bool started() const;
  bool headers_complete() const;
  bool expect_continue() const;
  size_t body_bytes() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace gantry::http

#endif  // GANTRY_ROUTER_HTTP_HTTP_PARSER_H_
