#include "router/http/http_parser.h"

#include <string>
#include <vector>

#include "common/error_codes.h"
#include "common/status.h"
#include "gtest/gtest.h"

namespace gantry::http {
namespace {

ParseOutcome Parse(const std::string& text, HttpRequest* req, HttpLimits limits = {}) {
  return ParseHttpRequest(text, limits, req);
}

TEST(HttpParser, SimpleGet) {
  HttpRequest req;
  std::string text = "GET /v1/models?x=1 HTTP/1.1\r\nHost: a\r\nX-Thing:  v \r\n\r\n";
  ParseOutcome out = Parse(text, &req);
  ASSERT_EQ(out.state, ParseState::kComplete);
  EXPECT_EQ(out.consumed, text.size());
  EXPECT_EQ(req.method, "GET");
  EXPECT_EQ(req.path, "/v1/models");
  EXPECT_EQ(req.query, "x=1");
  EXPECT_EQ(req.Header("x-thing"), "v");
  EXPECT_TRUE(req.keep_alive);
}

TEST(HttpParser, IncompleteAtEveryPrefix) {
  std::string text =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello";
  for (size_t i = 0; i < text.size(); ++i) {
    HttpRequest req;
    EXPECT_EQ(Parse(text.substr(0, i), &req).state, ParseState::kNeedMore) << i;
  }
  HttpRequest req;
  ParseOutcome out = Parse(text, &req);
  ASSERT_EQ(out.state, ParseState::kComplete);
  EXPECT_EQ(req.body, "hello");
}

TEST(HttpParser, PipelinedRequestsConsumeExactly) {
  std::string one = "POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc";
  std::string two = "GET /b HTTP/1.1\r\nHost: a\r\n\r\n";
  std::string both = one + two;
  HttpRequest req;
  ParseOutcome out = Parse(both, &req);
  ASSERT_EQ(out.state, ParseState::kComplete);
  EXPECT_EQ(out.consumed, one.size());
  EXPECT_EQ(req.body, "abc");
  out = Parse(both.substr(one.size()), &req);
  ASSERT_EQ(out.state, ParseState::kComplete);
  EXPECT_EQ(req.path, "/b");
}

TEST(HttpParser, Chunked) {
  std::string text =
      "POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: x\r\n\r\nNEXT";
  HttpRequest req;
  ParseOutcome out = Parse(text, &req);
  ASSERT_EQ(out.state, ParseState::kComplete);
  EXPECT_EQ(req.body, "hello world");
  EXPECT_EQ(text.substr(out.consumed), "NEXT");
  for (size_t i = 0; i + 4 < text.size(); ++i) {
    EXPECT_EQ(Parse(text.substr(0, i), &req).state, ParseState::kNeedMore) << i;
  }
}

void ExpectError(const std::string& text, const std::string& reason, int http,
                 HttpLimits limits = {}) {
  HttpRequest req;
  ParseOutcome out = ParseHttpRequest(text, limits, &req);
  ASSERT_EQ(out.state, ParseState::kError) << text;
  EXPECT_EQ(ReasonOf(out.error), reason) << text << " " << out.error;
  EXPECT_EQ(HttpStatusFor(out.error), http);
}

TEST(HttpParser, Errors) {
  ExpectError("GET / HTTP/1.1\nHost: a\r\n\r\n", "invalid_request", 400);
  ExpectError("GET  / HTTP/1.1\r\nHost: a\r\n\r\n", "invalid_request", 400);
  ExpectError("GET / HTTP/2.0\r\nHost: a\r\n\r\n", "invalid_request", 400);
  ExpectError("GET / HTTP/1.1\r\n\r\n", "invalid_request", 400);  // no Host
  ExpectError("GET / HTTP/1.1\r\nHost : a\r\n\r\n", "invalid_request", 400);
  ExpectError("GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", "invalid_request", 400);
  ExpectError("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
              "invalid_request", 400);
  ExpectError("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n"
              "Transfer-Encoding: chunked\r\n\r\n", "invalid_request", 400);
  ExpectError("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
              "invalid_request", 400);
  ExpectError("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", "invalid_request", 400);
  ExpectError("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
              "invalid_request", 400);
  ExpectError("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
              "ffffffffffffffffff\r\n", "invalid_request", 400);
  ExpectError("GET /\x01 HTTP/1.1\r\nHost: a\r\n\r\n", "invalid_request", 400);
}

TEST(HttpParser, Limits) {
  HttpLimits limits;
  limits.max_body_bytes = 10;
  limits.max_header_bytes = 200;
  limits.max_request_line_bytes = 64;
  limits.max_header_count = 3;
  ExpectError("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n", "body_too_large", 413,
              limits);
  ExpectError("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
              "6\r\nabcdef\r\n6\r\nabcdef\r\n0\r\n\r\n", "body_too_large", 413, limits);
  ExpectError("GET /" + std::string(100, 'a') + " HTTP/1.1\r\n", "headers_too_large", 431,
              limits);
  ExpectError("GET / HTTP/1.1\r\nHost: a\r\nX: " + std::string(300, 'a'), "headers_too_large",
              431, limits);
  ExpectError("GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", "headers_too_large",
              431, limits);
}

TEST(HttpParser, ConnectionSemantics) {
  HttpRequest req;
  ASSERT_EQ(Parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", &req).state,
            ParseState::kComplete);
  EXPECT_FALSE(req.keep_alive);
  ASSERT_EQ(Parse("GET / HTTP/1.0\r\n\r\n", &req).state, ParseState::kComplete);
  EXPECT_FALSE(req.keep_alive);
  ASSERT_EQ(Parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &req).state,
            ParseState::kComplete);
  EXPECT_TRUE(req.keep_alive);
  ASSERT_EQ(Parse("\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", &req).state, ParseState::kComplete);
}

TEST(HttpParser, ExpectContinueReported) {
  HttpRequest req;
  ParseOutcome out = Parse(
      "POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n", &req);
  EXPECT_EQ(out.state, ParseState::kNeedMore);
  EXPECT_TRUE(out.headers_complete);
  EXPECT_TRUE(out.expect_continue);
}

// The incremental parser fed one byte at a time: the head is reported once, before any
// body byte, and the chunked body and the pipelined request behind it come out whole.
TEST(RequestParser, ByteAtATime) {
  std::string text =
      "POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: x\r\n\r\n"
      "GET /b HTTP/1.1\r\nHost: a\r\n\r\n";
  RequestParser parser(HttpLimits{});
  std::vector<std::string> seen;
  int heads = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    absl::string_view byte = absl::string_view(text).substr(i, 1);
    size_t used = 0;
    while (true) {
      RequestParser::Step step = parser.Feed(byte.substr(used));
      used += step.consumed;
      if (step.event == RequestParser::Event::kHeadersComplete) {
        ++heads;
        EXPECT_EQ(parser.body_bytes(), 0u);
        continue;
      }
      if (step.event == RequestParser::Event::kComplete) {
        HttpRequest r = parser.TakeRequest();
        seen.push_back(r.path + ":" + r.body);
        continue;
      }
      ASSERT_EQ(step.event, RequestParser::Event::kNeedMore) << parser.error();
      break;
    }
    EXPECT_EQ(used, 1u);
  }
  EXPECT_EQ(heads, 2);
  EXPECT_EQ(seen, (std::vector<std::string>{"/a:hello world", "/b:"}));
}

TEST(HttpParser, StrictWhereLlhttpIsLenient) {
  ExpectError("GET / HTTP/1.1\nHost: a\r\n\r\n", "invalid_request", 400);
  ExpectError("GET / HTTP/1.1\r\nHost: a\r\n\n", "invalid_request", 400);
  ExpectError("GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
              "invalid_request", 400);
  ExpectError("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
              "invalid_request", 400);
  ExpectError("GET /\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n", "invalid_request", 400);
  // A chunk whose size line says it cannot fit is refused before its data.
  HttpLimits limits;
  limits.max_body_bytes = 10;
  ExpectError("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nb\r\n",
              "body_too_large", 413, limits);
}

}  // namespace
}  // namespace gantry::http
