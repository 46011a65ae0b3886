// The gateway refuses an unknown key once the request's headers are complete, before
// its body is sent (HttpServerOptions::on_headers -> Gateway::CheckHead), over a real
// loopback socket to the router wired as gantry-router wires it.
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "router/http/test_http_client.h"
#include "router/in_process_router_for_test.h"

namespace gantry::router {
namespace {

TEST(EarlyAuth, UnknownKeyAnswered401BeforeItsBody) {
  auto router = InProcessRouterForTest::Start(
      OneUserPolicyForTest(), {{"test-model", TinyModelEntryForTest("test-model")}});
  ASSERT_TRUE(router.ok()) << router.status();
  auto client = http::TestHttpClient::Connect((*router)->port());
  ASSERT_TRUE(client.ok());
  // 8 MiB announced, none of it sent: the answer comes anyway.
  ASSERT_TRUE(client->SendRaw("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                              "Authorization: Bearer not-a-key\r\n"
                              "Content-Type: application/json\r\nContent-Length: 8388608\r\n\r\n")
                  .ok());
  auto response = client->ReadResponse(5000);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 401);
  EXPECT_NE(response->body.find("\"code\":\"unauthenticated\""), std::string::npos);
  EXPECT_TRUE(client->WaitForClose(5000));
  // No key at all: the same.
  auto bare = http::TestHttpClient::Connect((*router)->port());
  ASSERT_TRUE(bare.ok());
  ASSERT_TRUE(bare->SendRaw("POST /v1/responses HTTP/1.1\r\nHost: x\r\n"
                            "Content-Length: 1000\r\n\r\n").ok());
  auto refused = bare->ReadResponse(5000);
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->status, 401);
  // A known key's request is read whole and goes on to the pipeline.
  std::string body = R"({"model":"test-model","messages":[{"role":"user","content":"hi"}]})";
  auto known = http::TestHttpClient::Connect((*router)->port());
  ASSERT_TRUE(known.ok());
  ASSERT_TRUE(known->SendRequest("POST", "/v1/chat/completions", body,
                                 {{"Authorization", "Bearer k-dev"},
                                  {"Content-Type", "application/json"}}).ok());
  auto answered = known->ReadResponse(10000);
  ASSERT_TRUE(answered.ok()) << answered.status();
  EXPECT_NE(answered->status, 401) << answered->body;
}

// Found by a red team: a complete head with a slow body on a route that needs no key
// (POST /healthz) held a connection for the whole body deadline; 4,096 of them kept
// every client out. A body where the route takes none is refused before it is read.
TEST(EarlyAuth, ABodyWhereTheRouteTakesNoneIsRefusedBeforeItIsRead) {
  auto router = InProcessRouterForTest::Start(
      OneUserPolicyForTest(), {{"test-model", TinyModelEntryForTest("test-model")}});
  ASSERT_TRUE(router.ok()) << router.status();
  const std::pair<const char*, int> kCases[] = {
      {"POST /healthz", 405}, {"GET /readyz", 400}, {"POST /nope", 404}, {"PUT /v1/models", 405}};
  for (const auto& [line, status] : kCases) {
    auto client = http::TestHttpClient::Connect((*router)->port());
    ASSERT_TRUE(client.ok());
    ASSERT_TRUE(client->SendRaw(absl::StrCat(line, " HTTP/1.1\r\nHost: x\r\n"
                                             "Content-Length: 60000\r\n\r\n")).ok());
    auto response = client->ReadResponse(5000);
    ASSERT_TRUE(response.ok()) << line << ": " << response.status();
    EXPECT_EQ(response->status, status) << line << ": " << response->body;
    EXPECT_TRUE(client->WaitForClose(5000)) << line;
  }
  // Without a body they are answered as before.
  auto plain = http::TestHttpClient::Connect((*router)->port());
  ASSERT_TRUE(plain.ok());
  ASSERT_TRUE(plain->SendRequest("GET", "/healthz", "").ok());
  auto ok = plain->ReadResponse(5000);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->status, 200);
}

}  // namespace
}  // namespace gantry::router
