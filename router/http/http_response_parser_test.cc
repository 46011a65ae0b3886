#include "router/http/http_response_parser.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "gtest/gtest.h"

namespace gantry::http {
namespace {

std::string Chunked(const std::string& payload, size_t piece) {
  std::string wire = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n";
  for (size_t at = 0; at < payload.size(); at += piece) {
    const std::string part = payload.substr(at, piece);
    absl::StrAppend(&wire, absl::Hex(part.size()), ";ext=1\r\n", part, "\r\n");
  }
  return wire + "0\r\nX-Trailer: t\r\n\r\n";
}

// Fed in pieces of every size at every boundary, a chunked body is always a prefix of
// the payload, each chunk reaches on_chunk whole, and the result is the payload.
TEST(ResponseParserTest, DecodesAChunkedBodyAtEveryArrivalBoundary) {
  std::string payload;
  for (int i = 0; i < 40; ++i) absl::StrAppend(&payload, "data: {\"n\":", i, "}\n\n");
  const std::string wire = Chunked(payload, 37);
  for (size_t step : {1, 2, 5, 64, 4096}) {
    ResponseParser parser(4096, 1 << 20);
    std::vector<std::string> chunks;
    parser.on_chunk = [&](absl::string_view c) { return chunks.emplace_back(c), true; };
    for (size_t at = 0; at < wire.size(); at += step) {
      auto used = parser.Feed(absl::string_view(wire).substr(at, step));
      ASSERT_TRUE(used.ok()) << used.status();
      const std::string& body = parser.response().body;
      ASSERT_EQ(payload.compare(0, body.size(), body), 0) << "not a prefix at " << at;
    }
    ASSERT_TRUE(parser.complete());
    ReceivedResponse r = parser.TakeResponse();
    EXPECT_EQ(r.status, 200);
    EXPECT_TRUE(r.chunked);
    EXPECT_EQ(r.body, payload);
    EXPECT_EQ(r.Header("content-type"), "text/event-stream");
    EXPECT_EQ(r.Header("x-trailer"), "");  // trailers are dropped
    ASSERT_EQ(chunks.size(), (payload.size() + 36) / 37);
    for (size_t i = 0; i < chunks.size(); ++i) EXPECT_EQ(chunks[i], payload.substr(i * 37, 37));
  }
}

TEST(ResponseParserTest, SkipsInterimResponsesAndLeavesTheNextResponsesBytes) {
  const std::string first = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\n"
                            "Content-Length: 5\r\nX-A: 1\r\n\r\nhello";
  const std::string second = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
  const std::string wire = first + second;
  ResponseParser parser(4096, 1 << 20);
  auto used = parser.Feed(wire);
  ASSERT_TRUE(used.ok()) << used.status();
  EXPECT_EQ(*used, first.size());
  ASSERT_TRUE(parser.complete());
  ReceivedResponse r = parser.TakeResponse();
  EXPECT_EQ(r.status, 201);
  EXPECT_EQ(r.body, "hello");
  EXPECT_EQ(r.Header("x-a"), "1");
  EXPECT_EQ(r.headers.size(), 2u);  // the interim response's none
  used = parser.Feed(absl::string_view(wire).substr(*used));
  ASSERT_TRUE(used.ok());
  EXPECT_EQ(*used, second.size());
  EXPECT_EQ(parser.TakeResponse().status, 404);
}

TEST(ResponseParserTest, RefusesMalformedAndOversizedBeforeBuffering) {
  struct Case {
    std::string wire;
    absl::StatusCode code;
  };
  const std::vector<Case> cases = {
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n", absl::StatusCode::kDataLoss},
      // A chunk and a declared length over the 16-byte body limit, before their bytes.
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffff\r\n", absl::StatusCode::kDataLoss},
      {"HTTP/1.1 200 OK\r\nContent-Length: 17\r\n\r\n", absl::StatusCode::kDataLoss},
      {"HTTP/1.1 200 OK\r\nX-Long: " + std::string(300, 'x') + "\r\n\r\n",
       absl::StatusCode::kDataLoss},
      {"HTTP/9 OK\r\n\r\n", absl::StatusCode::kDataLoss},
  };
  for (const Case& c : cases) {
    ResponseParser parser(256, 16);
    auto used = parser.Feed(c.wire);
    EXPECT_EQ(used.status().code(), c.code) << c.wire.substr(0, 60);
    EXPECT_EQ(ReasonOf(used.status()), "protocol_error");
    EXPECT_FALSE(parser.Feed("more").ok());  // the error stays
  }
}

TEST(ResponseParserTest, TheEndOfTheConnection) {
  {  // a body framed by the close
    ResponseParser parser(4096, 1 << 20);
    ASSERT_TRUE(parser.Feed("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of it").ok());
    EXPECT_FALSE(parser.complete());
    ASSERT_TRUE(parser.Finish().ok());
    EXPECT_EQ(parser.TakeResponse().body, "all of it");
  }
  for (const char* cut : {"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
                          "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
                          "HTTP/1.1 200 OK\r\nContent-"}) {
    ResponseParser parser(4096, 1 << 20);
    ASSERT_TRUE(parser.Feed(cut).ok());
    EXPECT_TRUE(absl::IsUnavailable(parser.Finish())) << cut;
  }
}

TEST(ResponseParserTest, OnChunkCanStopTheRead) {
  const std::string wire = Chunked("first|second|third", 6);
  ResponseParser parser(4096, 1 << 20);
  int seen = 0;
  parser.on_chunk = [&](absl::string_view) { return ++seen < 2; };
  auto used = parser.Feed(wire);
  ASSERT_TRUE(used.ok());
  EXPECT_LT(*used, wire.size());
  EXPECT_TRUE(parser.stopped());
  EXPECT_FALSE(parser.complete());
  EXPECT_EQ(parser.response().body, "first|second");
  EXPECT_EQ(*parser.Feed(absl::string_view(wire).substr(*used)), 0u);
}

}  // namespace
}  // namespace gantry::http
