#include "router/http/http_server.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "router/http/test_http_client.h"

namespace gantry::http {
namespace {

std::unique_ptr<HttpServer> StartEcho(HttpServerOptions options = {}) {
  auto server = HttpServer::Start(options, [](HttpRequest req, std::shared_ptr<ResponseWriter> w) {
    if (req.path == "/stream") {
      w->StartChunked(200, {{"Content-Type", "text/event-stream"}});
      for (int i = 0; i < 3; ++i) w->WriteChunk(absl::StrCat("data: ", i, "\n\n"));
      w->EndChunked();
      return;
    }
    if (req.path == "/drop") return;  // the writer answers 500 on its own
    HttpResponse response;
    response.body = absl::StrCat(req.method, " ", req.path, " ", req.body);
    w->Send(response);
  });
  EXPECT_TRUE(server.ok()) << server.status();
  return std::move(*server);
}

TEST(HttpServer, KeepAliveAndPipelining) {
  auto server = StartEcho();
  auto client = TestHttpClient::Connect(server->port());
  ASSERT_TRUE(client.ok());
  // Three pipelined requests in one write; answers come back in order.
  ASSERT_TRUE(client->SendRaw("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n1"
                              "GET /b HTTP/1.1\r\nHost: x\r\n\r\n"
                              "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                              "2\r\nzz\r\n0\r\n\r\n").ok());
  for (const char* expected : {"POST /a 1", "GET /b ", "POST /c zz"}) {
    auto response = client->ReadResponse();
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->status, 200);
    EXPECT_EQ(response->body, expected);
  }
  // The connection is still usable.
  ASSERT_TRUE(client->SendRequest("GET", "/d", "").ok());
  auto response = client->ReadResponse();
  ASSERT_TRUE(response.ok());
  EXPECT_EQ(response->body, "GET /d ");
}

// On plain TCP the handler sends its response itself and the loop learns of it only
// later; an idle keep-alive connection must still be closed by the idle timeout.
TEST(HttpServer, IdleTimeoutAfterTheHandlerSentTheResponseItself) {
  HttpServerOptions options;
  options.idle_timeout_ms = 200;
  auto server = StartEcho(options);
  auto client = TestHttpClient::Connect(server->port());
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(client->SendRequest("GET", "/a", "").ok());
  auto response = client->ReadResponse();
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->body, "GET /a ");
  // Nothing more is sent: the server closes the connection (read sees the end).
  auto next = client->ReadResponse(10000);
  EXPECT_TRUE(absl::IsUnavailable(next.status())) << next.status();
  // The count drops just after the socket is closed.
  for (int i = 0; i < 5000 && server->connection_count() != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(server->connection_count(), 0u);
}

// A request that arrives while the previous one is still being answered from another
// thread is parsed and answered after it, in order.
TEST(HttpServer, RequestArrivingWhileAnotherThreadAnswers) {
  std::atomic<bool> started{false}, release{false};
  std::vector<std::thread> answerers;
  std::mutex answerers_mu;
  auto server = HttpServer::Start({}, [&](HttpRequest req, std::shared_ptr<ResponseWriter> w) {
    if (req.path != "/slow") {
      w->Send(HttpResponse{200, {}, "fast"});
      return;
    }
    std::lock_guard<std::mutex> lock(answerers_mu);
    answerers.emplace_back([&, w] {
      started = true;
      while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      w->Send(HttpResponse{200, {}, "slow"});
    });
  });
  ASSERT_TRUE(server.ok());
  auto client = TestHttpClient::Connect((*server)->port());
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(client->SendRequest("GET", "/slow", "").ok());
  while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(client->SendRequest("GET", "/fast", "").ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // either order is valid
  release = true;
  for (const char* expected : {"slow", "fast"}) {
    auto response = client->ReadResponse(10000);
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->body, expected);
  }
  (*server)->Stop();
  for (auto& t : answerers) t.join();
}

TEST(HttpServer, ChunkedStreaming) {
  auto server = StartEcho();
  auto client = TestHttpClient::Connect(server->port());
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(client->SendRequest("GET", "/stream", "").ok());
  int chunks = 0;
  auto response = client->ReadResponse(5000, [&](absl::string_view) {
    ++chunks;
    return true;
  });
  ASSERT_TRUE(response.ok());
  EXPECT_TRUE(response->chunked);
  EXPECT_EQ(chunks, 3);
  EXPECT_EQ(response->body, "data: 0\n\ndata: 1\n\ndata: 2\n\n");
}

TEST(HttpServer, MalformedRequestGetsJsonErrorAndClose) {
  auto server = StartEcho();
  auto client = TestHttpClient::Connect(server->port());
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(client->SendRaw("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: zz\r\n\r\n").ok());
  auto response = client->ReadResponse();
  ASSERT_TRUE(response.ok());
  EXPECT_EQ(response->status, 400);
  EXPECT_NE(response->body.find("\"code\":\"invalid_request\""), std::string::npos);
  EXPECT_TRUE(client->WaitForClose(2000));
}

TEST(HttpServer, BodyTooLarge) {
  HttpServerOptions options;
  options.limits.max_body_bytes = 100;
  auto server = StartEcho(options);
  auto client = TestHttpClient::Connect(server->port());
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(client->SendRequest("POST", "/a", std::string(101, 'x')).ok());
  auto response = client->ReadResponse();
  ASSERT_TRUE(response.ok());
  EXPECT_EQ(response->status, 413);
  EXPECT_NE(response->body.find("body_too_large"), std::string::npos);
}

TEST(HttpServer, ExpectContinue) {
  auto server = StartEcho();
  auto client = TestHttpClient::Connect(server->port());
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(client->SendRaw("POST /e HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                              "Content-Length: 2\r\n\r\n").ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(client->SendRaw("ok").ok());
  auto response = client->ReadResponse();  // skips the 100
  ASSERT_TRUE(response.ok());
  EXPECT_EQ(response->body, "POST /e ok");
}

TEST(HttpServer, DroppedWriterAnswers500) {
  auto server = StartEcho();
  auto client = TestHttpClient::Connect(server->port());
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(client->SendRequest("GET", "/drop", "").ok());
  auto response = client->ReadResponse();
  ASSERT_TRUE(response.ok());
  EXPECT_EQ(response->status, 500);
  EXPECT_NE(response->body.find("\"code\":\"internal\""), std::string::npos);
}

TEST(HttpServer, ConnectionLimit) {
  HttpServerOptions options;
  options.max_connections = 2;
  auto server = StartEcho(options);
  auto a = TestHttpClient::Connect(server->port());
  auto b = TestHttpClient::Connect(server->port());
  ASSERT_TRUE(a.ok() && b.ok());
  // Both are inside a request (head read, body awaited): neither can make room.
  ASSERT_TRUE(a->SendRaw("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n").ok());
  ASSERT_TRUE(b->SendRaw("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n").ok());
  for (int i = 0; i < 200 && server->connection_count() < 2; ++i) usleep(5000);
  usleep(50000);  // both heads parsed
  auto c = TestHttpClient::Connect(server->port());
  ASSERT_TRUE(c.ok());
  auto response = c->ReadResponse();
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 503);
  EXPECT_EQ(response->Header("retry-after"), "1");
  EXPECT_NE(response->body.find("server_busy"), std::string::npos);
  // Once they are idle (waiting for their next request's head), the oldest is closed
  // to make room for a new client.
  ASSERT_TRUE(a->SendRaw("hello").ok());
  ASSERT_TRUE(a->ReadResponse().ok());
  ASSERT_TRUE(b->SendRaw("hello").ok());
  ASSERT_TRUE(b->ReadResponse().ok());
  auto d = TestHttpClient::Connect(server->port());
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE(d->SendRequest("GET", "/x", "").ok());
  auto served = d->ReadResponse();
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ(served->status, 200);
  EXPECT_EQ(server->evicted_connections(), 1u);
  EXPECT_TRUE(a->WaitForClose(2000) || b->WaitForClose(2000));  // the older of the two idle ones
}

TEST(HttpServer, OnCloseFiresWhenClientLeavesMidResponse) {
  std::atomic<bool> closed{false};
  std::shared_ptr<ResponseWriter> held;
  std::mutex mu;
  auto server = HttpServer::Start({}, [&](HttpRequest, std::shared_ptr<ResponseWriter> w) {
    w->StartChunked(200, {});
    w->WriteChunk("first");
    w->OnClose([&] { closed = true; });
    std::lock_guard<std::mutex> lock(mu);
    held = w;
  });
  ASSERT_TRUE(server.ok());
  {
    auto client = TestHttpClient::Connect((*server)->port());
    ASSERT_TRUE(client.ok());
    ASSERT_TRUE(client->SendRequest("GET", "/", "").ok());
    auto response = client->ReadResponse(5000, [](absl::string_view) { return false; });
    ASSERT_TRUE(response.ok());
  }
  for (int i = 0; i < 200 && !closed; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(closed);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_TRUE(held->closed());
  EXPECT_FALSE(held->WriteChunk("more"));
  held.reset();
}

}  // namespace
}  // namespace gantry::http
