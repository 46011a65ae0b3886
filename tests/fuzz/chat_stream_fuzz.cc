// Fuzz target: how the harness reads the router's streamed replies (outside bytes from
// the network): the chunked-body decoder, the SSE chat.completion.chunk stream and the
// first-token test. First byte: 0 = parse the rest as a whole stream; 1 = decode the
// rest as a chunked body arriving in growing prefixes; 2 = the first-token test on the
// rest as one event. Invariants: never crashes; an accepted stream's tool calls all have
// an id and a name; the decoded body only ever grows, each time by appending.
#include <cstdlib>
#include <string>

#include "harness-svc/http_client.h"
#include "harness-svc/router_client.h"

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
      ChunkedBodyDecoder decoder(1 << 20);
      std::string before;
      for (size_t cut = 0; cut <= rest.size(); cut += 1 + cut / 3) {
        if (!decoder.Feed(absl::string_view(rest).substr(0, cut)).ok()) break;
        if (decoder.body().compare(0, before.size(), before) != 0) std::abort();
        before = decoder.body();
      }
      break;
    }
    default:
      (void)IsFirstTokenEvent(rest);
  }
  return 0;
}
