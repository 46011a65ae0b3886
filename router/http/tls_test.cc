// TLS on the HTTP server over real sockets, with certificates the openssl CLI makes at
// test time and OpenSSL's own client (test_http_client.h): requests, keep-alive, a body
// large enough that writes stop on a full socket, a stream that stays open while bad
// handshakes (plain HTTP, garbage, TLS 1.1, an untrusted client, stalled clients) come
// and go, and configuration errors.
#include <openssl/ssl.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/status.h"
#include "gtest/gtest.h"
#include "router/http/http_server.h"
#include "router/http/test_http_client.h"
#include "router/http/tls.h"

namespace gantry::http {
namespace {

std::string Dir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir ? dir : "/tmp";
}

// A self-signed P-256 certificate for 127.0.0.1: PREFIX.cert.pem, PREFIX.key.pem.
bool MakeCertificate(const std::string& prefix) {
  std::string command = absl::StrCat(
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 "
      "-subj /CN=gantry-test -addext subjectAltName=IP:127.0.0.1 -keyout ",
      prefix, ".key.pem -out ", prefix, ".cert.pem 2>", prefix, ".log");
  return std::system(command.c_str()) == 0;
}

std::string BigBody() {
  std::string body(8u << 20, '\0');
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>('a' + i % 26);
  return body;
}

class TlsServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(MakeCertificate(Dir() + "/server")) << "openssl req failed";
    ASSERT_TRUE(MakeCertificate(Dir() + "/other"));
  }

  void SetUp() override {
    auto tls = TlsContext::Load(Cert("server"), Key("server"));
    ASSERT_TRUE(tls.ok()) << tls.status();
    HttpServerOptions options;
    options.tls = *tls;
    auto server = HttpServer::Start(options, [this](HttpRequest req,
                                                    std::shared_ptr<ResponseWriter> w) {
      if (req.path == "/stream") {
        w->StartChunked(200, {{"Content-Type", "text/event-stream"}});
        w->WriteChunk("data: first\n\n");
        release_.WaitForNotificationWithTimeout(absl::Seconds(30));
        w->WriteChunk("data: second\n\n");
        w->EndChunked();
        return;
      }
      HttpResponse response;
      response.body = req.path == "/big" ? BigBody() : "hello over tls: " + req.body;
      w->Send(response);
    });
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  static std::string Cert(const std::string& name) { return Dir() + "/" + name + ".cert.pem"; }
  static std::string Key(const std::string& name) { return Dir() + "/" + name + ".key.pem"; }

  absl::StatusOr<std::string> Chat(TestHttpClient& client, const std::string& body) {
    absl::Status sent = client.SendRequest("POST", "/chat", body);
    if (!sent.ok()) return sent;
    auto response = client.ReadResponse();
    if (!response.ok()) return response.status();
    if (response->status != 200) return absl::InternalError(absl::StrCat(response->status));
    return response->body;
  }

  absl::Notification release_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(TlsServerTest, RequestsKeepAliveAndALargeBody) {
  auto client = TestHttpClient::ConnectTls(server_->port(), Cert("server"));
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ(*Chat(*client, "one"), "hello over tls: one");
  // 8 MiB: the server's writes stop on a full socket (WANT_WRITE) and resume.
  ASSERT_TRUE(client->SendRequest("GET", "/big", "").ok());
  auto big = client->ReadResponse(30000);
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_TRUE(big->body == BigBody()) << big->body.size();
  EXPECT_EQ(*Chat(*client, "two"), "hello over tls: two");  // the same connection
}

TEST_F(TlsServerTest, BadHandshakesDoNotDisturbAStreamOrOtherClients) {
  auto streaming = TestHttpClient::ConnectTls(server_->port(), Cert("server"));
  ASSERT_TRUE(streaming.ok()) << streaming.status();
  ASSERT_TRUE(streaming->SendRequest("GET", "/stream", "").ok());
  std::vector<TestHttpClient> stalled;
  bool first = true;
  auto response = streaming->ReadResponse(30000, [&](absl::string_view chunk) {
    if (!first) return true;
    first = false;
    EXPECT_EQ(chunk, "data: first\n\n");
    // Plain HTTP to the TLS port: closed, no answer in plain text.
    auto plain = TestHttpClient::Connect(server_->port());
    EXPECT_TRUE(plain->SendRaw("GET /chat HTTP/1.1\r\nHost: x\r\n\r\n").ok());
    EXPECT_TRUE(plain->WaitForClose(10000));
    // A TLS record header followed by garbage.
    auto garbage = TestHttpClient::Connect(server_->port());
    EXPECT_TRUE(garbage->SendRaw(std::string("\x16\x03\x01\x00\x10", 5) + "0123456789abcdef").ok());
    EXPECT_TRUE(garbage->WaitForClose(10000));
    // TLS 1.1 only: refused (TLS 1.2 is the minimum).
    EXPECT_FALSE(TestHttpClient::ConnectTls(server_->port(), Cert("server"), TLS1_1_VERSION).ok());
    // A client that does not trust this certificate gives up mid-handshake.
    EXPECT_FALSE(TestHttpClient::ConnectTls(server_->port(), Cert("other")).ok());
    // Clients that stall: silent, and half a record header.
    stalled.push_back(*TestHttpClient::Connect(server_->port()));
    stalled.push_back(*TestHttpClient::Connect(server_->port()));
    EXPECT_TRUE(stalled.back().SendRaw(std::string("\x16\x03\x01", 3)).ok());
    // Meanwhile a good client is served.
    auto good = TestHttpClient::ConnectTls(server_->port(), Cert("server"));
    EXPECT_TRUE(good.ok()) << good.status();
    if (good.ok()) {
      EXPECT_EQ(*Chat(*good, "meanwhile"), "hello over tls: meanwhile");
    }
    release_.Notify();
    return true;
  });
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_TRUE(response->chunked);
  EXPECT_EQ(response->body, "data: first\n\ndata: second\n\n");
  EXPECT_EQ(*Chat(*streaming, "after"), "hello over tls: after");
}

TEST_F(TlsServerTest, StalledHandshakesAreClosedAfterTheHandshakeTimeout) {
  HttpServerOptions options;
  options.tls = *TlsContext::Load(Cert("server"), Key("server"));
  options.handshake_timeout_ms = 100;
  auto server = HttpServer::Start(options, [](HttpRequest, std::shared_ptr<ResponseWriter> w) {
    w->Send(HttpResponse{200, {}, "ok"});
  });
  ASSERT_TRUE(server.ok()) << server.status();
  auto silent = TestHttpClient::Connect((*server)->port());
  auto half = TestHttpClient::Connect((*server)->port());
  ASSERT_TRUE(half->SendRaw(std::string("\x16\x03\x01", 3)).ok());
  // A finished handshake is not subject to it: this client stays and is served.
  auto good = TestHttpClient::ConnectTls((*server)->port(), Cert("server"));
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_TRUE(silent->WaitForClose(10000));
  EXPECT_TRUE(half->WaitForClose(10000));
  ASSERT_TRUE(good->SendRequest("GET", "/", "").ok());
  auto response = good->ReadResponse();
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->body, "ok");
}

TEST_F(TlsServerTest, ConfigurationErrorsHaveAReason) {
  auto missing = TlsContext::Load(Dir() + "/absent.pem", Key("server"));
  EXPECT_EQ(ReasonOf(missing.status()), "invalid_tls_config");
  auto mismatch = TlsContext::Load(Cert("server"), Key("other"));
  EXPECT_EQ(ReasonOf(mismatch.status()), "invalid_tls_config");
  EXPECT_NE(mismatch.status().message().find("mismatch"), absl::string_view::npos)
      << mismatch.status();
  auto not_pem = TlsContext::Load(Dir() + "/server.log", Key("server"));
  EXPECT_EQ(ReasonOf(not_pem.status()), "invalid_tls_config");
}

}  // namespace
}  // namespace gantry::http
