// The broker against peers that are not the workers they claim: raw sockets and
// malformed frames, READYs beyond a key's grant, identities taken or foreseen, plain
// workers where CURVE is due, oversized frames.
#include "router/broker/broker.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <zmq.hpp>

#include "common/curve_keys.h"
#include "common/error_codes.h"
#include "common/ids.h"
#include "common/status.h"
#include "common/zmq_io.h"
#include "gtest/gtest.h"
#include "proto/worker_frames.h"
#include "router/broker/worker_auth.h"
#include "router/fake_worker_for_test.h"
#include "router/broker/broker_test_util.h"

namespace gantry::broker {
namespace {

zmq::socket_t RawPeer(zmq::context_t& context, const Broker& broker) {
  zmq::socket_t dealer(context, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.connect(broker.endpoint());
  return dealer;
}

TEST(Broker, UnknownPeerGetsDisconnectAndMalformedFramesAreDropped) {
  auto broker = StartBroker();
  zmq::context_t context(1);
  zmq::socket_t dealer = RawPeer(context, *broker);
  v1::Heartbeat hb;
  ASSERT_TRUE(SendFrames(dealer, wire::EncodeFrames(hb)).ok());
  auto reply = RecvFrames(dealer, 3000);
  ASSERT_TRUE(reply.ok()) << reply.status();
  auto decoded = wire::DecodeFrames(*reply, wire::Direction::kRouterToWorker);
  ASSERT_TRUE(decoded.ok());
  ASSERT_TRUE(std::holds_alternative<v1::Disconnect>(*decoded));
  EXPECT_EQ(std::get<v1::Disconnect>(*decoded).reason().reason(), "protocol_error");
  // Garbage from a LIVE worker is dropped and counted; the worker stays LIVE.
  FakeWorkerForTest worker(WorkerOptions(*broker));
  ASSERT_TRUE(WaitLive(*broker, 1));
  ASSERT_TRUE(SendFrames(dealer, {"", "GNTW01", "\x09", "zz"}).ok());
  ASSERT_TRUE(WaitUntil([&] { return broker->stats().dropped_frames >= 2; }, 3000));
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_TRUE(broker->Submit(Request(), sink).ok());
  ASSERT_TRUE(sink->WaitTerminal(5000));
  EXPECT_EQ(sink->terminal().finish_reason(), v1::FINISH_STOP);
}

// `admitted` is router -> client only: one from a worker is dropped (and counted), the
// stream goes on without a gap.
TEST(Broker, AdmittedFromAWorkerIsDropped) {
  auto broker = StartBroker();
  zmq::context_t context(1);
  zmq::socket_t dealer = RawPeer(context, *broker);
  v1::Ready ready;
  ready.set_protocol_version(wire::kWorkerProtocolVersion);
  ready.set_worker_id("host/1/raw");
  ready.mutable_bundle()->set_model("test-model");
  ready.mutable_bundle()->set_identity_sha256(std::string(64, 'b'));
  ready.set_slots(1);
  ready.set_free_slots(1);
  ready.set_heartbeat_interval_ms(1000);
  ASSERT_TRUE(SendFrames(dealer, wire::EncodeFrames(ready)).ok());
  ASSERT_TRUE(WaitLive(*broker, 1));
  auto sink = std::make_shared<RecordingSink>();
  const v1::InferenceRequest request = Request();
  ASSERT_TRUE(broker->Submit(request, sink).ok());
  ASSERT_TRUE(WaitUntil([&] {
    auto frames = RecvFrames(dealer, 50);
    if (!frames.ok()) return false;
    auto decoded = wire::DecodeFrames(*frames, wire::Direction::kRouterToWorker);
    return decoded.ok() && std::holds_alternative<v1::Request>(*decoded);
  }, 5000));
  const uint64_t dropped_before = broker->stats().dropped_frames;
  v1::Partial partial;
  partial.set_request_id(request.request_id());
  for (int seq = 0; seq < 2; ++seq) {
    v1::StreamEvent* e = partial.add_events();
    e->set_request_id(request.request_id());
    e->set_seq(seq);
    if (seq == 0) e->mutable_admitted()->set_priority(v1::PRIORITY_ACCESSIBILITY);
    if (seq == 1) e->mutable_text()->set_text("hi");
  }
  ASSERT_TRUE(SendFrames(dealer, wire::EncodeFrames(partial)).ok());
  v1::Final final_message;
  final_message.set_request_id(request.request_id());
  v1::StreamEvent* end = final_message.mutable_terminal();
  end->set_request_id(request.request_id());
  end->set_seq(2);
  end->mutable_terminal()->set_finish_reason(v1::FINISH_STOP);
  ToProto(absl::OkStatus(), end->mutable_terminal()->mutable_status());
  ASSERT_TRUE(SendFrames(dealer, wire::EncodeFrames(final_message)).ok());
  ASSERT_TRUE(sink->WaitTerminal(5000));
  auto events = sink->events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].text().text(), "hi");
  EXPECT_EQ(events[0].seq(), 0u);
  EXPECT_EQ(events[1].terminal().finish_reason(), v1::FINISH_STOP);  // no seq gap
  EXPECT_EQ(broker->stats().dropped_frames, dropped_before + 1);
}


// --- Worker identity and bounds (issue 18) -------------------------------------------

const std::string kBundleB(64, 'b');  // the fake worker's default bundle identity
const std::string kBundleC(64, 'c');

// A fake worker that connects with `keys` as a CURVE client of `router_public`.
FakeWorkerOptions CurveWorker(const Broker& broker, const std::string& id,
                              const CurveKeyPair& keys, const std::string& router_public) {
  FakeWorkerOptions options = WorkerOptions(broker, id);
  options.curve_public_z85 = keys.public_z85;
  options.curve_secret_z85 = keys.secret_z85;
  options.curve_server_public_z85 = router_public;
  return options;
}

// The first DISCONNECT reason `worker` received, waiting up to 5 s; "" if none came.
std::string FirstDisconnectReason(const FakeWorkerForTest& worker) {
  worker.WaitFor([&] { return !worker.disconnect_reasons().empty(); }, 5000);
  auto reasons = worker.disconnect_reasons();
  return reasons.empty() ? "" : reasons.front();
}

// Submits one request and checks that `worker` (and only it) answered it whole.
void ExpectServedBy(Broker& broker, const FakeWorkerForTest& worker, int served_before) {
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_TRUE(broker.Submit(Request(), sink).ok());
  ASSERT_TRUE(sink->WaitTerminal(5000));
  EXPECT_EQ(sink->Text(), "Hello, world");
  EXPECT_EQ(sink->terminal().finish_reason(), v1::FINISH_STOP);
  EXPECT_EQ(worker.requests_received(), served_before + 1);
}

TEST(WorkerAllowList, KeysBindToModelsAndBundles) {
  auto a = GenerateCurveKeyPair();
  auto b = GenerateCurveKeyPair();
  auto c = GenerateCurveKeyPair();
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  const std::string text = "# workers of the demo\n" + a->public_z85 +
                           "  models=qwen3-0.6b,llama-3.2:1b bundles=" + kBundleB + "," +
                           kBundleC + "\r\n\t" + b->public_z85 + " bundles=* models=*\n" +
                           c->public_z85 + " models=m bundles=" + kBundleB + "\n" +
                           c->public_z85 + " models=m bundles=" + kBundleB + "\n";
  auto grants = ParseWorkerAllowList(text);
  ASSERT_TRUE(grants.ok()) << grants.status();
  ASSERT_EQ(grants->size(), 3u);  // the repeated identical entry is folded
  const WorkerGrant* ga = nullptr;
  const WorkerGrant* gb = nullptr;
  const WorkerGrant* gc = nullptr;
  for (const auto& g : *grants) {
    if (g.key_z85 == a->public_z85) ga = &g;
    if (g.key_z85 == b->public_z85) gb = &g;
    if (g.key_z85 == c->public_z85) gc = &g;
  }
  ASSERT_TRUE(ga != nullptr && gb != nullptr && gc != nullptr);
  EXPECT_EQ(ga->models, (std::set<std::string>{"llama-3.2:1b", "qwen3-0.6b"}));
  EXPECT_TRUE(GrantPermits(*ga, "qwen3-0.6b", kBundleC));
  EXPECT_TRUE(GrantPermits(*ga, "llama-3.2:1b", kBundleB));
  EXPECT_FALSE(GrantPermits(*ga, "other", kBundleB));
  EXPECT_FALSE(GrantPermits(*ga, "qwen3-0.6b", std::string(64, 'd')));
  EXPECT_TRUE(GrantPermits(*gb, "anything", kBundleC));
  EXPECT_TRUE(GrantPermits(*gc, "m", kBundleB));
  EXPECT_FALSE(GrantPermits(*gc, "m", kBundleC));
  EXPECT_FALSE(GrantPermits(*gc, "*", kBundleB));  // "*" is no model name
  // Fail closed: a grant with nothing listed permits nothing.
  EXPECT_FALSE(GrantPermits(WorkerGrant{a->public_z85, {}, {}}, "m", kBundleB));

  const std::string key = a->public_z85;
  const std::string ok_bundles = " bundles=" + kBundleB;
  for (const std::string& bad : std::vector<std::string>{
           std::string("# nobody\n"),
           std::string(""),
           key + "\n",                                          // bare key: would serve anything
           key + " models=m\n",                                 // no bundles=
           key + ok_bundles + "\n",                             // no models=
           key + " model=m" + ok_bundles + "\n",                // unknown field
           key + " models=" + ok_bundles + "\n",                // empty value
           key + " models=a,,b" + ok_bundles + "\n",            // empty name
           key + " models=a models=b" + ok_bundles + "\n",      // field twice
           key + " models=a,a" + ok_bundles + "\n",             // name twice
           key + " models=*,a" + ok_bundles + "\n",             // "*" is not a name
           key + " models=" + std::string(129, 'm') + ok_bundles + "\n",  // too long
           key + " models=bad\"name" + ok_bundles + "\n",       // bad character
           key + " models=m bundles=" + std::string(64, 'B') + "\n",  // not lowercase hex
           key + " models=m bundles=abc\n",                     // not 64 digits
           key + " models=a" + ok_bundles + "\n" + key + " models=b" + ok_bundles + "\n",
           std::string("not-a-key models=a") + ok_bundles + "\n",
           std::string(kMaxKeyFileBytes + 1, '#'),
       }) {
    auto result = ParseWorkerAllowList(bad);
    EXPECT_EQ(ReasonOf(result.status()), "invalid_key_file") << bad;
  }
  auto second_line = ParseWorkerAllowList("# c\n" + key + "\n");
  EXPECT_NE(second_line.status().message().find("line 2"), absl::string_view::npos)
      << second_line.status();
  EXPECT_NE(second_line.status().message().find("models=* bundles=*"), absl::string_view::npos)
      << second_line.status();
}

// With CURVE: a stranger's key never gets past the handshake; an allowed key whose READY
// names a model or a bundle its grant does not list is refused (worker_not_allowed) and
// never becomes LIVE; the real worker keeps serving throughout.
TEST(Broker, AReadyBeyondTheKeysGrantIsRefusedAndTheRealWorkerKeepsServing) {
  auto router_keys = GenerateCurveKeyPair();
  auto real = GenerateCurveKeyPair();
  auto stranger = GenerateCurveKeyPair();
  ASSERT_TRUE(router_keys.ok() && real.ok() && stranger.ok());
  WorkerGrant grant;
  grant.key_z85 = real->public_z85;
  grant.models = {"test-model"};
  grant.bundles = {kBundleB};
  BrokerOptions options;
  options.endpoint = "tcp://127.0.0.1:*";
  options.curve = CurveServerOptions{router_keys->secret_z85, {grant}};
  auto started = Broker::Start(options);
  ASSERT_TRUE(started.ok()) << started.status();
  Broker& broker = **started;

  FakeWorkerForTest worker(CurveWorker(broker, "host/1/real", *real, router_keys->public_z85));
  ASSERT_TRUE(WaitLive(broker, 1));
  ExpectServedBy(broker, worker, 0);

  // A wrong key: refused at the handshake.
  FakeWorkerForTest rogue(CurveWorker(broker, "host/9/rogue", *stranger, router_keys->public_z85));
  ASSERT_TRUE(WaitUntil([&] { return broker.stats().handshakes_refused >= 1; }, 5000));

  // The allowed key claiming another model.
  FakeWorkerOptions other_model = CurveWorker(broker, "host/2/m", *real, router_keys->public_z85);
  other_model.model = "other-model";
  FakeWorkerForTest claims_model(other_model);
  EXPECT_EQ(FirstDisconnectReason(claims_model), kWorkerNotAllowed);

  // The allowed key claiming its model with another bundle.
  FakeWorkerOptions other_bundle = CurveWorker(broker, "host/3/b", *real, router_keys->public_z85);
  other_bundle.bundle_sha256 = kBundleC;
  FakeWorkerForTest claims_bundle(other_bundle);
  EXPECT_EQ(FirstDisconnectReason(claims_bundle), kWorkerNotAllowed);

  // The allowed key, within its grant, claiming the real worker's id.
  FakeWorkerForTest claims_id(CurveWorker(broker, "host/1/real", *real, router_keys->public_z85));
  EXPECT_EQ(FirstDisconnectReason(claims_id), kWorkerIdTaken);

  EXPECT_GE(broker.stats().ready_refused, 3u);
  EXPECT_EQ(broker.stats().live_workers, 1u);
  EXPECT_EQ(broker.LiveWorkerCount("other-model"), 0u);
  EXPECT_EQ(broker.LiveBundle("test-model")->identity_sha256(), kBundleB);
  EXPECT_EQ(broker.stats().workers_expired, 0u);
  for (int i = 1; i <= 3; ++i) ExpectServedBy(broker, worker, i);
  EXPECT_EQ(claims_model.requests_received() + claims_bundle.requests_received() +
                claims_id.requests_received() + rogue.requests_received(),
            0);
  EXPECT_TRUE(rogue.disconnect_reasons().empty());  // never past the handshake
}

// Found by a red team: a peer chooses its routing id, so once the real worker's
// connection is gone (killed, no DISCONNECT) another connection may take the same id
// before the registration expires. An allowed key for another model did, sent only
// HEARTBEATs, received the real worker's prompts and answered them. Now every message
// must come under the key of the READY that registered the id: the squatter's first
// message expires the registration, nothing is dispatched to it, and the real worker,
// reconnecting, registers again.
TEST(Broker, AnotherKeyOnARegisteredIdentityIsNotThatWorker) {
  auto router_keys = GenerateCurveKeyPair();
  auto real = GenerateCurveKeyPair();
  auto other = GenerateCurveKeyPair();
  ASSERT_TRUE(router_keys.ok() && real.ok() && other.ok());
  WorkerGrant real_grant{real->public_z85, {"test-model"}, {kBundleB}};
  WorkerGrant other_grant{other->public_z85, {"other-model"}, {kBundleB}};
  BrokerOptions options;
  options.endpoint = "tcp://127.0.0.1:*";
  options.curve = CurveServerOptions{router_keys->secret_z85, {real_grant, other_grant}};
  auto started = Broker::Start(options);
  ASSERT_TRUE(started.ok()) << started.status();
  Broker& broker = **started;

  FakeWorkerOptions real_options = CurveWorker(broker, "host/1/real", *real, router_keys->public_z85);
  real_options.routing_id = "worker-a";  // as the worker of the red team's run
  auto victim = std::make_unique<FakeWorkerForTest>(real_options);
  ASSERT_TRUE(WaitLive(broker, 1));
  ExpectServedBy(broker, *victim, 0);
  victim->Kill();  // gone without a DISCONNECT: the registration stays LIVE for now
  ASSERT_TRUE(victim->WaitFor([&] { return victim->dead(); }, 5000));
  victim.reset();

  FakeWorkerOptions squat = CurveWorker(broker, "host/9/rogue", *other, router_keys->public_z85);
  squat.routing_id = "worker-a";
  squat.send_ready = false;
  squat.heartbeat_interval_ms = 50;
  FakeWorkerForTest rogue(squat);
  ASSERT_TRUE(WaitUntil([&] { return broker.stats().workers_expired >= 1; }, 5000));
  EXPECT_EQ(broker.stats().live_workers, 0u);
  EXPECT_EQ(FirstDisconnectReason(rogue), kWorkerNotAllowed);
  auto sink = std::make_shared<RecordingSink>();
  EXPECT_EQ(ReasonOf(broker.Submit(Request(), sink)), "no_worker");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(rogue.requests_received(), 0);
  EXPECT_EQ(broker.stats().live_workers, 0u);  // its heartbeats never register it

  // The real worker, back (its own key, a fresh connection), serves again.
  FakeWorkerForTest back(CurveWorker(broker, "host/1/real", *real, router_keys->public_z85));
  ASSERT_TRUE(WaitLive(broker, 1));
  ExpectServedBy(broker, back, 0);
  EXPECT_EQ(rogue.requests_received(), 0);
}

// Found by the second red team, both with an allowed key for another model: (1) libzmq
// numbers the peers that set no routing id from an unseeded rand(), the same in every
// process, and aborts when it generates a number a peer chose for itself: peers that
// claimed the next numbers crashed the router when the real worker (re)connected;
// (2) claiming the real worker's worker_id first locked it out (worker_id_taken).
// Now the numbers are seeded from the OS, and worker_ids are per key.
TEST(Broker, PeersCannotForeseeIdentitiesOrTakeAnotherKeysWorkerId) {
  auto router_keys = GenerateCurveKeyPair();
  auto real = GenerateCurveKeyPair();
  auto other = GenerateCurveKeyPair();
  ASSERT_TRUE(router_keys.ok() && real.ok() && other.ok());
  BrokerOptions options;
  options.endpoint = "tcp://127.0.0.1:*";
  options.curve = CurveServerOptions{
      router_keys->secret_z85,
      {WorkerGrant{real->public_z85, {"test-model"}, {kBundleB}},
       WorkerGrant{other->public_z85, {"other-model"}, {kBundleB}}}};
  auto started = Broker::Start(options);
  ASSERT_TRUE(started.ok()) << started.status();
  Broker& broker = **started;
  // The numbers an unseeded libzmq gives its first peers: 0x00 then rand()'s first
  // outputs with seed 1 (0x6b8b4567, ...), counting up.
  std::vector<std::unique_ptr<FakeWorkerForTest>> squatters;
  for (uint32_t n = 0x6b8b4567; n < 0x6b8b4567 + 8; ++n) {
    FakeWorkerOptions squat = CurveWorker(broker, "", *other, router_keys->public_z85);
    squat.routing_id = std::string(1, '\0') + std::string{static_cast<char>(n >> 24),
                                                           static_cast<char>(n >> 16),
                                                           static_cast<char>(n >> 8),
                                                           static_cast<char>(n)};
    squat.send_ready = false;
    squatters.push_back(std::make_unique<FakeWorkerForTest>(squat));
  }
  // The other key registers the real worker's worker_id first (for its own model).
  FakeWorkerOptions first = CurveWorker(broker, "host/1/real", *other, router_keys->public_z85);
  first.model = "other-model";
  FakeWorkerForTest claims(first);
  ASSERT_TRUE(WaitLive(broker, 1));
  // The real worker, numbered by the router (no routing id of its own), registers.
  FakeWorkerForTest worker(CurveWorker(broker, "host/1/real", *real, router_keys->public_z85));
  ASSERT_TRUE(WaitLive(broker, 2));
  ExpectServedBy(broker, worker, 0);
  EXPECT_EQ(broker.LiveWorkerCount("test-model"), 1u);
  EXPECT_EQ(broker.LiveWorkerCount("other-model"), 1u);
}

// A second worker announcing the worker_id of a LIVE one is refused (worker_id_taken);
// the first is not expired and keeps serving.
TEST(Broker, ADuplicateWorkerIdIsRefusedAndTheFirstKeepsServing) {
  auto broker = StartBroker();
  FakeWorkerForTest real(WorkerOptions(*broker, "host/1/a"));
  ASSERT_TRUE(WaitLive(*broker, 1));
  ExpectServedBy(*broker, real, 0);

  FakeWorkerForTest impostor(WorkerOptions(*broker, "host/1/a"));
  EXPECT_EQ(FirstDisconnectReason(impostor), kWorkerIdTaken);
  EXPECT_EQ(broker->stats().live_workers, 1u);
  EXPECT_EQ(broker->stats().workers_expired, 0u);
  EXPECT_GE(broker->stats().ready_refused, 1u);
  for (int i = 1; i <= 3; ++i) ExpectServedBy(*broker, real, i);
  EXPECT_EQ(impostor.requests_received(), 0);
}

// The id is the LIVE worker's only while it lives: once it expired, a worker may take it
// (a worker that restarted, or reconnected with a new socket).
TEST(Broker, AnExpiredWorkersIdCanBeTakenAgain) {
  auto broker = StartFastBroker();
  FakeWorkerOptions options = WorkerOptions(*broker, "host/1/a");
  options.heartbeat_interval_ms = 100;
  auto first = std::make_unique<FakeWorkerForTest>(options);
  ASSERT_TRUE(WaitLive(*broker, 1));
  first->Kill();
  ASSERT_TRUE(WaitUntil([&] { return broker->stats().live_workers == 0; }, 5000));
  FakeWorkerForTest second(options);
  ASSERT_TRUE(WaitLive(*broker, 1));
  ExpectServedBy(*broker, second, 0);
  EXPECT_TRUE(second.disconnect_reasons().empty());
}

// READY's claims are bounded: absurd slots or context lengths are refused, and a
// HEARTBEAT cannot give a worker more credit than the slots it announced.
TEST(Broker, ReadyClaimsBeyondTheBoundsAreRefused) {
  auto broker = StartBroker();
  for (auto mutate : std::vector<std::function<void(FakeWorkerOptions&)>>{
           [](FakeWorkerOptions& o) { o.slots = kMaxWorkerSlots + 1; },
           [](FakeWorkerOptions& o) { o.context_length = kMaxContextLength + 1; },
           [](FakeWorkerOptions& o) { o.default_max_tokens = kMaxContextLength + 1; },
           [](FakeWorkerOptions& o) { o.bundle_sha256 = "not-a-sha"; },
           [](FakeWorkerOptions& o) { o.worker_id = std::string(kMaxWorkerIdBytes + 1, 'w'); },
       }) {
    FakeWorkerOptions options = WorkerOptions(*broker, "host/5/bounds");
    mutate(options);
    FakeWorkerForTest worker(options);
    EXPECT_EQ(FirstDisconnectReason(worker), "protocol_error");
    EXPECT_EQ(broker->stats().live_workers, 0u);
  }
  EXPECT_EQ(broker->stats().ready_refused, 5u);
}

// A directory for ipc sockets with a short path (sun_path holds 107 bytes).
std::string ShortTempDir() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string base = tmp != nullptr && std::strlen(tmp) < 60 ? tmp : "/tmp";
  std::string templ = base + "/gbk-XXXXXX";
  char* made = mkdtemp(templ.data());
  EXPECT_NE(made, nullptr);
  return templ;
}

// Without CURVE, plain workers are accepted only on ipc:// in a directory only this user
// can open, or with insecure_workers.
TEST(Broker, PlainWorkersOnlyOnAPrivateIpcDirectoryOrWhenInsecureIsSaid) {
  BrokerOptions options;
  options.endpoint = "tcp://127.0.0.1:*";
  auto refused = Broker::Start(options);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_NE(refused.status().message().find("--insecure-workers"), absl::string_view::npos);
  for (const char* endpoint : {"ipc://@gantry-abstract", "ipc://*"}) {
    options.endpoint = endpoint;
    EXPECT_TRUE(absl::IsFailedPrecondition(Broker::Start(options).status())) << endpoint;
  }
  options.endpoint = "tcp://127.0.0.1:*";
  options.insecure_workers = true;
  EXPECT_TRUE(Broker::Start(options).ok());
  options.insecure_workers = false;

  const std::string dir = ShortTempDir();
  ASSERT_EQ(chmod(dir.c_str(), 0750), 0);
  options.endpoint = "ipc://" + dir + "/workers.sock";
  auto open_dir = Broker::Start(options);
  EXPECT_TRUE(absl::IsFailedPrecondition(open_dir.status())) << open_dir.status();
  EXPECT_NE(open_dir.status().message().find("0750"), absl::string_view::npos) << open_dir.status();
  options.endpoint = "ipc://" + dir + "/absent/workers.sock";
  EXPECT_TRUE(absl::IsFailedPrecondition(Broker::Start(options).status()));

  ASSERT_EQ(chmod(dir.c_str(), 0700), 0);
  options.endpoint = "ipc://" + dir + "/workers.sock";
  auto broker = Broker::Start(options);
  ASSERT_TRUE(broker.ok()) << broker.status();
  FakeWorkerForTest worker(WorkerOptions(**broker, "host/1/ipc"));
  ASSERT_TRUE(WaitLive(**broker, 1));
  ExpectServedBy(**broker, worker, 0);
}

size_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// A raw ZMTP 3.0 peer (NULL mechanism, as a DEALER) that announces one frame of
// `frame_bytes` and streams zeros for it from a 64 KiB buffer, so that the sender itself
// holds nothing. Returns how many bytes of the frame the kernel took before the broker
// closed the connection (or all of them).
uint64_t SendOversizedFrame(int port, uint64_t frame_bytes) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  timeval timeout{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  std::string greeting(64, '\0');
  greeting[0] = '\xff';
  greeting[9] = '\x7f';
  greeting[10] = 3;  // ZMTP 3.0
  greeting.replace(12, 4, "NULL");
  std::string ready_body = std::string("\x05READY") + '\x0b' + "Socket-Type" +
                           std::string("\0\0\0\x06", 4) + "DEALER";
  std::string ready = std::string("\x04") + static_cast<char>(ready_body.size()) + ready_body;
  std::string header = "\x02";  // a long final frame: 8-byte size follows
  for (int shift = 56; shift >= 0; shift -= 8) {
    header.push_back(static_cast<char>((frame_bytes >> shift) & 0xff));
  }
  const std::string preamble = greeting + ready + header;
  EXPECT_EQ(send(fd, preamble.data(), preamble.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(preamble.size()));
  static const char zeros[64 << 10] = {};
  uint64_t sent = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (sent < frame_bytes && std::chrono::steady_clock::now() < until) {
    ssize_t n =
        send(fd, zeros, std::min<uint64_t>(sizeof(zeros), frame_bytes - sent), MSG_NOSIGNAL);
    if (n <= 0) break;  // reset by the broker (or stalled: it stopped reading)
    sent += static_cast<uint64_t>(n);
  }
  close(fd);
  return sent;
}

// A frame larger than any GNTW/1 message is refused by libzmq (ZMQ_MAXMSGSIZE) as soon
// as its size is announced: the broker never buffers it, does not grow, and keeps
// serving its workers.
TEST(Broker, AnOversizedFrameIsDroppedBeforeItIsBuffered) {
  auto broker = StartBroker();
  FakeWorkerForTest worker(WorkerOptions(*broker));
  ASSERT_TRUE(WaitLive(*broker, 1));
  const std::string& endpoint = broker->endpoint();
  const int port = std::atoi(endpoint.substr(endpoint.rfind(':') + 1).c_str());

  const size_t before = ResidentBytes();
  std::atomic<bool> done{false};
  std::atomic<size_t> peak{before};
  std::thread sampler([&] {
    while (!done.load()) {
      peak = std::max(peak.load(), ResidentBytes());
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  constexpr uint64_t kFrame = uint64_t{256} << 20;
  const uint64_t sent = SendOversizedFrame(port, kFrame);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let the broker drain
  done = true;
  sampler.join();
  EXPECT_LT(sent, kFrame) << "the broker read the whole oversized frame";
  EXPECT_LT(peak.load() - before, size_t{32} << 20)
      << "the broker grew by " << ((peak.load() - before) >> 20) << " MiB";
  EXPECT_EQ(broker->stats().live_workers, 1u);
  ExpectServedBy(*broker, worker, 0);
}

// A worker's KV cache type is one of the names a worker says, else "unknown": what a
// worker sends is never echoed into /metrics.
TEST(Broker, AWorkersKvCacheTypeIsKnownOrUnknown) {
  auto broker = StartBroker();
  FakeWorkerOptions q8 = WorkerOptions(*broker, "host/1/q8");
  q8.kv_type = "q8_0";
  FakeWorkerOptions odd = WorkerOptions(*broker, "host/2/odd");
  odd.kv_type = std::string(4096, 'x') + "\"} 1\nfake_metric 1";
  FakeWorkerForTest a(q8), b(odd);
  ASSERT_TRUE(WaitLive(*broker, 2));
  const std::vector<WorkerKv> kv = broker->WorkerKvUse();
  ASSERT_EQ(kv.size(), 2u);
  EXPECT_EQ(kv[0].worker_id, "host/1/q8");
  EXPECT_EQ(kv[0].type, "q8_0");
  EXPECT_EQ(kv[0].bytes, uint64_t{128} << 20);
  EXPECT_EQ(kv[1].type, "unknown");
}

}  // namespace
}  // namespace gantry::broker
