#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "common/curve_keys.h"
#include "common/handshake_monitor.h"
#include "common/status.h"
#include "common/zap_handler.h"
#include "common/zmq_io.h"
#include "gtest/gtest.h"

namespace gantry {
namespace {

// RFC 32's test vector: these 8 bytes are "HelloWorld".
const std::string kHelloBytes("\x86\x4F\xD2\x6F\xB5\x59\xF7\x5B", 8);

std::string Key(char fill) { return std::string(40, fill); }

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir ? dir : "/tmp";
}

TEST(CurveKeys, Z85RoundTripAndTestVector) {
  std::string bytes;
  for (int i = 0; i < 4; ++i) bytes += kHelloBytes;
  std::string z85 = EncodeCurveKeyZ85(bytes);
  EXPECT_EQ(z85, "HelloWorldHelloWorldHelloWorldHelloWorld");
  auto back = DecodeCurveKeyZ85(z85);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, bytes);
  EXPECT_EQ(EncodeCurveKeyZ85("short"), "");
}

TEST(CurveKeys, DecodeRefusesBadCharactersLengthAndOverflow) {
  EXPECT_EQ(ReasonOf(DecodeCurveKeyZ85(Key('a') + "a").status()), "invalid_key_file");
  std::string bad = Key('a');
  bad[7] = '~';  // not in the alphabet
  EXPECT_EQ(ReasonOf(DecodeCurveKeyZ85(bad).status()), "invalid_key_file");
  // "#####" is 85^5 - 1, more than 32 bits.
  auto overflow = DecodeCurveKeyZ85(Key('#'));
  EXPECT_EQ(ReasonOf(overflow.status()), "invalid_key_file");
  EXPECT_NE(overflow.status().message().find("32 bits"), absl::string_view::npos);
}

TEST(CurveKeys, KeyFileGrammar) {
  const std::string key = "HelloWorldHelloWorldHelloWorldHelloWorld";
  auto parsed = ParseCurveKeyText("# comment\n\n  " + key + " \r\n# tail");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, key);
  EXPECT_TRUE(ParseCurveKeyText(key).ok());  // no final newline
  // '#' is a Z85 character, but no key can start with it (the group would exceed 32
  // bits), so a '#' line of 40 Z85 characters is a comment too.
  std::string hash_line = "#" + key.substr(1);
  EXPECT_FALSE(DecodeCurveKeyZ85(hash_line).ok());
  EXPECT_EQ(*ParseCurveKeyText(hash_line + "\n" + key + "\n"), key);

  const std::vector<std::string> bad_texts = {
      "", "# only a comment\n", key + "\n" + key, key + "x", "not a key\n",
      key + "\n" + std::string(1, '\0'), std::string(kMaxKeyFileBytes + 1, '#'),
      "$" + key.substr(1)};
  for (const std::string& text : bad_texts) {
    auto result = ParseCurveKeyText(text);
    EXPECT_FALSE(result.ok()) << text.substr(0, 90);
    EXPECT_EQ(ReasonOf(result.status()), "invalid_key_file");
  }
  auto line = ParseCurveKeyText("# a\n" + key + "\nnope\n");
  EXPECT_NE(line.status().message().find("line 3"), absl::string_view::npos) << line.status();
}

TEST(CurveKeys, AllowListFoldsDuplicatesAndNeedsAKey) {
  auto pair1 = GenerateCurveKeyPair();
  auto pair2 = GenerateCurveKeyPair();
  ASSERT_TRUE(pair1.ok() && pair2.ok());
  auto list = ParseCurveAllowList("# workers\n" + pair1->public_z85 + "\n" + pair2->public_z85 +
                                  "\n" + pair1->public_z85 + "\n");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->size(), 2u);
  EXPECT_EQ(ReasonOf(ParseCurveAllowList("# nobody\n").status()), "invalid_key_file");
}

TEST(CurveKeys, GeneratedPairDerivesAndWritesWithModes) {
  auto pair = GenerateCurveKeyPair();
  ASSERT_TRUE(pair.ok()) << pair.status();
  auto derived = CurvePublicKeyOf(pair->secret_z85);
  ASSERT_TRUE(derived.ok());
  EXPECT_EQ(*derived, pair->public_z85);

  const std::string prefix = TempDir() + "/gen_" + std::to_string(getpid());
  ASSERT_TRUE(WriteCurveKeyPair(prefix, *pair).ok());
  struct stat st;
  ASSERT_EQ(stat((prefix + ".key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat((prefix + ".pub").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  EXPECT_TRUE(absl::IsAlreadyExists(WriteCurveKeyPair(prefix, *pair)));

  auto secret = ReadCurveSecretKeyFile(prefix + ".key");
  ASSERT_TRUE(secret.ok()) << secret.status();
  EXPECT_EQ(*secret, pair->secret_z85);
  auto client = ReadCurveClientKeys(prefix + ".key", prefix + ".pub");
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ(client->public_z85, pair->public_z85);

  // A secret key others may read is refused; a public key file is not a secret.
  ASSERT_EQ(chmod((prefix + ".key").c_str(), 0640), 0);
  auto open_secret = ReadCurveSecretKeyFile(prefix + ".key");
  EXPECT_EQ(ReasonOf(open_secret.status()), "invalid_key_file");
  EXPECT_NE(open_secret.status().message().find("0640"), absl::string_view::npos);
  EXPECT_TRUE(absl::IsNotFound(ReadCurvePublicKeyFile(prefix + ".missing").status()));
}

std::vector<std::string> ZapRequest(const std::string& mechanism, const std::string& key,
                                    const std::string& domain = "d") {
  std::vector<std::string> r = {"1.0", "id7", domain, "10.0.0.2", "", mechanism};
  if (!key.empty()) r.push_back(key);
  return r;
}

TEST(ZapHandler, AdmitsListedKeysOnly) {
  auto known = GenerateCurveKeyPair();
  auto unknown = GenerateCurveKeyPair();
  ZapAllowList allow("d", {known->public_z85});
  ZapDecision decision;
  auto reply = AnswerZapRequest(ZapRequest("CURVE", *DecodeCurveKeyZ85(known->public_z85)),
                                allow, &decision);
  ASSERT_EQ(reply.size(), 6u);
  EXPECT_EQ(reply[0], "1.0");
  EXPECT_EQ(reply[1], "id7");
  EXPECT_EQ(reply[2], "200");
  EXPECT_EQ(decision.outcome, ZapDecision::Outcome::kAdmitted);
  EXPECT_EQ(reply[4], decision.fingerprint);
  EXPECT_EQ(decision.fingerprint.size(), 16u);
  EXPECT_EQ(decision.address, "10.0.0.2");

  const std::string unknown_bytes = *DecodeCurveKeyZ85(unknown->public_z85);
  reply = AnswerZapRequest(ZapRequest("CURVE", unknown_bytes), allow, &decision);
  EXPECT_EQ(reply[2], "400");
  EXPECT_EQ(decision.outcome, ZapDecision::Outcome::kRefused);
  EXPECT_EQ(decision.fingerprint, CurveKeyFingerprint(unknown_bytes));

  reply = AnswerZapRequest(ZapRequest("CURVE", *DecodeCurveKeyZ85(known->public_z85), "other"),
                           allow, &decision);
  EXPECT_EQ(reply[2], "400");
  reply = AnswerZapRequest(ZapRequest("NULL", ""), allow, &decision);
  EXPECT_EQ(reply[2], "400");
}

TEST(ZapHandler, MalformedRequestsGetA500Reply) {
  ZapAllowList allow("d", {});
  ZapDecision decision;
  for (const auto& request : std::vector<std::vector<std::string>>{
           {}, {"1.0"}, {"2.0", "id", "d", "a", "", "CURVE", std::string(32, 'k')},
           ZapRequest("CURVE", "short"), ZapRequest("CURVE", "")}) {
    auto reply = AnswerZapRequest(request, allow, &decision);
    ASSERT_EQ(reply.size(), 6u);
    EXPECT_EQ(reply[2], "500");
    EXPECT_EQ(decision.outcome, ZapDecision::Outcome::kMalformed);
  }
}

// Real libzmq sockets over tcp loopback: a CURVE server whose ZAP handler runs
// AnswerZapRequest, a client with a listed key (its message arrives) and one with an
// unknown key (its handshake fails; its HandshakeMonitor counts the refusal).
TEST(ZapHandler, RealCurveHandshakes) {
  ASSERT_TRUE(CurveSupported());
  auto server_keys = GenerateCurveKeyPair();
  auto known = GenerateCurveKeyPair();
  auto unknown = GenerateCurveKeyPair();
  zmq::context_t context(1);
  zmq::socket_t zap(context, zmq::socket_type::rep);
  zap.bind(kZapEndpoint);
  ZapAllowList allow("test", {known->public_z85});
  std::atomic<bool> stop{false};
  std::thread handler([&] {
    while (!stop) {
      auto request = RecvFrames(zap, 50);
      if (!request.ok()) continue;
      ZapDecision decision;
      (void)SendFrames(zap, AnswerZapRequest(*request, allow, &decision));
    }
  });
  zmq::socket_t server(context, zmq::socket_type::router);
  server.set(zmq::sockopt::curve_server, 1);
  server.set(zmq::sockopt::curve_secretkey, server_keys->secret_z85);
  server.set(zmq::sockopt::zap_domain, "test");
  server.set(zmq::sockopt::linger, 0);
  server.bind("tcp://127.0.0.1:*");
  const std::string endpoint = LastEndpoint(server);

  zmq::socket_t good(context, zmq::socket_type::dealer);
  good.set(zmq::sockopt::linger, 0);
  ASSERT_TRUE(ConfigureCurveClient(good.handle(), {known->public_z85, known->secret_z85,
                                                   server_keys->public_z85}).ok());
  good.connect(endpoint);
  ASSERT_TRUE(SendFrames(good, {"hello"}).ok());
  auto got = RecvFrames(server, 10000);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->back(), "hello");

  zmq::socket_t bad(context, zmq::socket_type::dealer);
  bad.set(zmq::sockopt::linger, 0);
  ASSERT_TRUE(ConfigureCurveClient(bad.handle(), {unknown->public_z85, unknown->secret_z85,
                                                  server_keys->public_z85}).ok());
  auto monitor = HandshakeMonitor::Attach(context, bad, endpoint);
  ASSERT_TRUE(monitor.ok()) << monitor.status();
  bad.connect(endpoint);
  ASSERT_TRUE(SendFrames(bad, {"let me in"}).ok());  // queued; never delivered
  for (int i = 0; i < 200 && (*monitor)->failures() == 0; ++i) {
    zmq::pollitem_t item{(*monitor)->socket().handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(50));
    (*monitor)->Drain();
  }
  EXPECT_GE((*monitor)->failures(), 1u);
  EXPECT_FALSE(RecvFrames(server, 0).ok());  // nothing from the refused client
  monitor->reset();

  stop = true;
  handler.join();
}

}  // namespace
}  // namespace gantry
