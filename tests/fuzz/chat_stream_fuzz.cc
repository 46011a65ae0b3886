// Fuzz target: how the harness reads the router's streamed replies (outside bytes from
// the network): the response parser (router/http/http_response_parser.h, llhttp) on a
// chunked body, the SSE chat.completion.chunk stream and the first-token test. First
// byte: 0 = parse the rest as a whole stream; 1 = the rest as a chunked body after a
// response head, arriving in pieces of growing size; 2 = the first-token test on the
// rest as one event. Invariants: never crashes; an accepted stream's tool calls all have
// an id and a name; the decoded body only ever grows, each time by appending, and stays
// within the parser's limit.
#include <cstdlib>
#include <string>

#include "harness-svc/http_client.h"
#include "harness-svc/router_client.h"
#include "router/http/http_response_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gantry::harness;
  if (size == 0) return 0;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0: {
      auto reply = ParseChatStream(rest);
      if (reply.ok()) {
        for (const auto& call : reply->tool_calls) {
          if (call.id.empty() || call.name.empty()) std::abort();
        }
      }
      break;
    }
    case 1: {
      constexpr size_t kLimit = 1 << 16;
      gantry::http::ResponseParser parser(4096, kLimit);
      const std::string wire = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + rest;
      std::string before;
      for (size_t at = 0, piece = 1; at < wire.size(); at += piece, piece += 1 + piece / 3) {
        auto used = parser.Feed(absl::string_view(wire).substr(at, piece));
        if (!used.ok() || parser.complete()) break;
        const std::string& body = parser.response().body;
        if (body.size() > kLimit || body.compare(0, before.size(), before) != 0) std::abort();
        before = body;
      }
      break;
    }
    default:
      (void)IsFirstTokenEvent(rest);
  }
  return 0;
}
