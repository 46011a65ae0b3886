// HTTP/1.1 response parsing for Gantry's own clients (the harness's calls to the
// router, the tests' client): llhttp, the parser of the router's requests
// (http_parser.h), so there is one chunked decoder in the project, not one per client.
//
// ResponseParser is incremental: feed it each read as it arrives; every byte is looked
// at once and a chunked body is decoded as it comes, appended once to the response's
// body. Interim responses (1xx) are skipped. It stops after a complete response, so that
// bytes of the next one (a keep-alive connection) stay with the caller. A body framed by
// neither Content-Length nor chunked runs to the end of the connection: Finish().
//
// Errors (DATA_LOSS, reason protocol_error): malformed framing, a header section over
// max_header_bytes, a body over max_body_bytes (refused from Content-Length or a chunk's
// size before its bytes arrive), the connection closing inside the response.
//
// Thread-safety: one thread at a time.
#ifndef GANTRY_ROUTER_HTTP_HTTP_RESPONSE_PARSER_H_
#define GANTRY_ROUTER_HTTP_HTTP_RESPONSE_PARSER_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gantry::http {

struct ReceivedResponse {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // names lowercased, in order
  std::string body;                                          // de-chunked
  bool chunked = false;
  // The first value of a header (name in lowercase), or "" when absent.
  std::string Header(absl::string_view lowercase_name) const;
};

class ResponseParser {
 public:
  ResponseParser(size_t max_header_bytes, size_t max_body_bytes);
  ~ResponseParser();
  ResponseParser(const ResponseParser&) = delete;
  ResponseParser& operator=(const ResponseParser&) = delete;

  // Called with each complete chunk's data of a chunked body, as it completes (the body
  // keeps it too); returning false stops Feed() there (stopped() is then true and the
  // response is partial).
  std::function<bool(absl::string_view chunk)> on_chunk;

  // Parses `data` up to the end of the response; returns the bytes used (less than
  // data.size() only after complete() or stopped()). Errors: as the header comment; after
  // one, every call returns it again.
  absl::StatusOr<size_t> Feed(absl::string_view data);
  // The connection ended: completes a body that runs to the close. Errors: DATA_LOSS
  // protocol_error when the response is incomplete.
  absl::Status Finish();

  bool headers_complete() const;
  bool complete() const;
  bool stopped() const;
  const ReceivedResponse& response() const;
  ReceivedResponse TakeResponse();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace gantry::http

#endif  // GANTRY_ROUTER_HTTP_HTTP_RESPONSE_PARSER_H_
