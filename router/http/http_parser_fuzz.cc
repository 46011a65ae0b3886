// Fuzz target: the HTTP/1.1 request parser (bytes from any TCP client), one-shot and
// incremental. Invariants: never crashes; a complete parse consumes at least one byte
// and no more than given; parsing a buffer split into pipelined requests always makes
// progress; a prefix of an input that parses completely is either incomplete or parses
// the same request (no request is decided before its bytes arrived); and the
// incremental parser fed the same bytes in pieces (sizes taken from the input: one
// byte, a few, a chunk line's worth) finds the same requests, bodies (the chunked
// decoder across every split) and error reasons as one parse over the whole buffer.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/error_codes.h"
#include "common/status.h"
#include "router/http/http_parser.h"

namespace {

using gantry::http::HttpLimits;
using gantry::http::HttpRequest;
using gantry::http::ParseHttpRequest;
using gantry::http::ParseOutcome;
using gantry::http::ParseState;
using gantry::http::RequestParser;

struct Seen {
  std::vector<std::string> requests;  // method, target and body of each, in order
  std::string error;                  // the reason of the error that ended the stream
};

std::string Describe(const HttpRequest& r) {
  return r.method + " " + r.target + " " + std::to_string(r.keep_alive) + " " + r.body;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  HttpLimits limits;
  limits.max_body_bytes = 4096;
  limits.max_header_bytes = 2048;
  limits.max_request_line_bytes = 512;
  limits.max_header_count = 16;
  limits.max_chunk_line_bytes = 64;
  std::string buffer(reinterpret_cast<const char*>(data), size);
  absl::string_view rest(buffer);
  Seen whole;
  for (int i = 0; i < 64 && !rest.empty(); ++i) {
    HttpRequest request;
    ParseOutcome outcome = ParseHttpRequest(rest, limits, &request);
    if (outcome.state == ParseState::kError) whole.error = std::string(gantry::ReasonOf(outcome.error));
    if (outcome.state != ParseState::kComplete) break;
    if (outcome.consumed == 0 || outcome.consumed > rest.size()) std::abort();
    if (request.body.size() > limits.max_body_bytes) std::abort();
    whole.requests.push_back(Describe(request));
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
  const bool whole_ran_out = whole.requests.size() == 64;

  // The same bytes fed in pieces.
  const size_t step = size == 0 ? 1 : 1 + data[0] % 23;
  RequestParser parser(limits);
  Seen pieces;
  size_t pos = 0;
  while (pos < buffer.size() && pieces.requests.size() < 64 && pieces.error.empty()) {
    absl::string_view piece = absl::string_view(buffer).substr(pos, step);
    size_t used = 0;
    while (true) {
      RequestParser::Step s = parser.Feed(piece.substr(used));
      used += s.consumed;
      if (used > piece.size()) std::abort();
      if (s.event == RequestParser::Event::kComplete) {
        HttpRequest r = parser.TakeRequest();
        if (r.body.size() > limits.max_body_bytes) std::abort();
        pieces.requests.push_back(Describe(r));
        if (pieces.requests.size() == 64) break;
        continue;
      }
      if (s.event == RequestParser::Event::kError) {
        pieces.error = std::string(gantry::ReasonOf(parser.error()));
        break;
      }
      if (s.event == RequestParser::Event::kHeadersComplete) continue;
      break;  // kNeedMore: the piece is used up
    }
    if (pieces.error.empty() && pieces.requests.size() < 64 && used != piece.size()) std::abort();
    pos += piece.size();
  }
  if (!whole_ran_out && pieces.requests.size() < 64) {
    if (pieces.requests != whole.requests) std::abort();
    if (pieces.error != whole.error) std::abort();
  }
  return 0;
}
