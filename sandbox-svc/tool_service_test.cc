// Integration: the real service on an ephemeral tcp loopback port, real ToolCalls from
// a REQ client and a DEALER client, malformed frames, and concurrency.
#include "sandbox-svc/tool_service.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <zmq.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/zmq_io.h"
#include "gtest/gtest.h"
#include "policy/policy_reloader.h"
#include "sandbox-svc/sandbox_test_support.h"

namespace gantry::sandbox {
namespace {

using testing::ExecCall;
using testing::MakeWorkspace;

class ToolServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::RequireRoot()) GTEST_SKIP() << "not root (recorded as a failure)";
    ws_ = MakeWorkspace("service_ws", {{"small.txt", "small file\n"}});
    CommandRules rules;
    rules.name = "default";
    SandboxViewResolver resolver(ws_);
    for (const char* exe : {"cat", "sleep", "echo"}) {
      rules.executables.push_back({exe, *resolver.Resolve(exe, "/"), {}, {}, {}});
    }
    SandboxOptions options;
    options.rule_sets.push_back(rules);
    sandbox_ = std::make_unique<Sandbox>(options);
    ToolServiceOptions service_options;
    service_options.endpoint = "tcp://127.0.0.1:*";
    service_options.workers = 2;
    service_options.queue_capacity = 8;
    service_ = std::make_unique<ToolService>(*sandbox_, service_options);
    ASSERT_TRUE(service_->Start().ok());
  }
  void TearDown() override {
    if (service_) service_->Stop();
  }
  v1::ToolCall Call(const std::string& id, const std::vector<std::string>& argv) {
    v1::ToolCall c = ExecCall(ws_, argv);
    c.set_call_id(id);
    c.mutable_grant()->set_exec_rules("default");
    return c;
  }
  std::string ws_;
  zmq::context_t context_{1};
  std::unique_ptr<Sandbox> sandbox_;
  std::unique_ptr<ToolService> service_;
};

TEST_F(ToolServiceTest, ReqClientGetsResultsUnderTheSameCallId) {
  zmq::socket_t req(context_, zmq::socket_type::req);
  req.set(zmq::sockopt::linger, 0);
  req.connect(service_->endpoint());
  for (int i = 0; i < 3; ++i) {
    const std::string id = "call_" + std::to_string(i);
    ASSERT_TRUE(SendFrames(req, {Call(id, {"cat", "small.txt"}).SerializeAsString()}).ok());
    auto frames = RecvFrames(req, 10000);
    ASSERT_TRUE(frames.ok()) << frames.status();
    ASSERT_EQ(frames->size(), 1u);
    v1::ToolResult r;
    ASSERT_TRUE(r.ParseFromString((*frames)[0]));
    EXPECT_EQ(r.call_id(), id);
    EXPECT_EQ(r.outcome(), v1::TOOL_RAN);
    EXPECT_EQ(r.stdout(), "small file\n");
  }
  // A denial is a normal answer.
  ASSERT_TRUE(SendFrames(req, {Call("call_d", {"rm", "small.txt"}).SerializeAsString()}).ok());
  auto frames = RecvFrames(req, 10000);
  ASSERT_TRUE(frames.ok());
  v1::ToolResult r;
  ASSERT_TRUE(r.ParseFromString(frames->back()));
  EXPECT_EQ(r.outcome(), v1::TOOL_DENIED);
  EXPECT_TRUE(absl::StartsWith(r.denial_reason(), "rule:default-deny:"));
}

TEST_F(ToolServiceTest, MalformedFramesAreAnsweredOrDroppedNeverFatal) {
  zmq::socket_t dealer(context_, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.connect(service_->endpoint());
  // A body that is not a ToolCall: answered TOOL_ERROR protocol_error.
  ASSERT_TRUE(SendFrames(dealer, {"", std::string("\xff\xff\xff garbage", 12)}).ok());
  auto frames = RecvFrames(dealer, 10000);
  ASSERT_TRUE(frames.ok()) << frames.status();
  v1::ToolResult r;
  ASSERT_TRUE(r.ParseFromString(frames->back()));
  EXPECT_EQ(r.outcome(), v1::TOOL_ERROR);
  EXPECT_EQ(r.error().reason(), "protocol_error");
  // Wrong envelopes: dropped and counted.
  ASSERT_TRUE(SendFrames(dealer, {"a", "b", "c", "d"}).ok());
  ASSERT_TRUE(SendFrames(dealer, {"x", "y"}).ok());  // 3 frames at the router, no delimiter
  // The service still answers, also a DEALER without a delimiter.
  ASSERT_TRUE(SendFrames(dealer, {Call("call_ok", {"echo", "alive"}).SerializeAsString()}).ok());
  frames = RecvFrames(dealer, 10000);
  ASSERT_TRUE(frames.ok()) << frames.status();
  ASSERT_EQ(frames->size(), 1u);
  ASSERT_TRUE(r.ParseFromString((*frames)[0]));
  EXPECT_EQ(r.call_id(), "call_ok");
  EXPECT_EQ(r.stdout(), "alive\n");
  auto stats = service_->stats();
  EXPECT_EQ(stats.answered_malformed, 1u);
  EXPECT_EQ(stats.dropped_malformed, 2u);
}

TEST_F(ToolServiceTest, RunsCallsConcurrentlyAndRejectsWhenFull) {
  zmq::socket_t dealer(context_, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.connect(service_->endpoint());
  // 2 workers, queue of 8: 20 slow calls at once; some are answered queue_full at once.
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(SendFrames(dealer, {"", Call("call_" + std::to_string(i), {"sleep", "0.3"})
                                            .SerializeAsString()})
                    .ok());
  }
  int ran = 0, full = 0;
  for (int i = 0; i < 20; ++i) {
    auto frames = RecvFrames(dealer, 20000);
    ASSERT_TRUE(frames.ok()) << frames.status();
    v1::ToolResult r;
    ASSERT_TRUE(r.ParseFromString(frames->back()));
    if (r.outcome() == v1::TOOL_RAN) ++ran;
    if (r.outcome() == v1::TOOL_ERROR && r.error().reason() == "queue_full") ++full;
  }
  EXPECT_EQ(ran + full, 20);
  EXPECT_GE(ran, 8);  // the queue alone holds 8
  EXPECT_GT(full, 0);
  EXPECT_EQ(service_->stats().rejected_queue_full, static_cast<uint64_t>(full));
}

// The service as gantry-sandbox --policy runs it: the rules of each call come from the
// policy in force, and a changed policy file applies to the next call (inotify), while a
// broken one leaves the last good policy in force.
class PolicyServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::RequireRoot()) GTEST_SKIP() << "not root (recorded as a failure)";
    ws_ = MakeWorkspace("policy_ws", {{"small.txt", "small file\n"}});
    path_ = absl::StrCat(std::getenv("TEST_TMPDIR"), "/policy.yaml");
    Publish({"/usr/bin/echo"});
    auto reloader = policy::PolicyReloader::Create(path_);
    ASSERT_TRUE(reloader.ok()) << reloader.status();
    reloader_ = *std::move(reloader);
    ASSERT_TRUE(reloader_->StartWatching().ok());
    SandboxOptions options;
    policy::PolicyReloader* r = reloader_.get();
    options.policy = [r] { return r->Current(); };
    sandbox_ = std::make_unique<Sandbox>(options);
    ToolServiceOptions service_options;
    service_options.endpoint = "tcp://127.0.0.1:*";
    service_ = std::make_unique<ToolService>(*sandbox_, service_options);
    ASSERT_TRUE(service_->Start().ok());
    req_.set(zmq::sockopt::linger, 0);
    req_.connect(service_->endpoint());
  }
  void TearDown() override {
    if (service_) service_->Stop();
  }
  // Writes a policy granting `executables` to the user "agent", atomically (rename).
  void Publish(const std::vector<std::string>& executables, const std::string& extra = "") {
    const std::string text = testing::PolicyGranting("agent", executables, extra);
    const std::string tmp = path_ + ".tmp";
    std::ofstream(tmp) << text;
    ASSERT_EQ(std::rename(tmp.c_str(), path_.c_str()), 0);
  }
  v1::ToolResult Exec(const std::vector<std::string>& argv) {
    v1::ToolCall c = ExecCall(ws_, argv);
    c.mutable_grant()->set_exec_rules("agent");
    v1::ToolResult r;
    EXPECT_TRUE(SendFrames(req_, {c.SerializeAsString()}).ok());
    auto frames = RecvFrames(req_, 10000);
    EXPECT_TRUE(frames.ok()) << frames.status();
    if (frames.ok()) EXPECT_TRUE(r.ParseFromString(frames->back()));
    return r;
  }
  std::string ws_, path_;
  std::unique_ptr<policy::PolicyReloader> reloader_;
  zmq::context_t context_{1};
  zmq::socket_t req_{context_, zmq::socket_type::req};
  std::unique_ptr<Sandbox> sandbox_;
  std::unique_ptr<ToolService> service_;
};

TEST_F(PolicyServiceTest, APolicyChangeAppliesToTheNextCall) {
  v1::ToolResult r = Exec({"cat", "small.txt"});
  EXPECT_EQ(r.outcome(), v1::TOOL_DENIED);
  EXPECT_EQ(r.denial_reason(), "rule:default_deny: no grant of 'agent' names executable '/usr/bin/cat'");
  EXPECT_EQ(Exec({"echo", "hi"}).stdout(), "hi\n");

  Publish({"/usr/bin/echo", "/usr/bin/cat"});
  ASSERT_TRUE(reloader_->WaitForAttemptsForTest(1, 10000));
  EXPECT_EQ(reloader_->reloads(), 1u);
  r = Exec({"cat", "small.txt"});
  EXPECT_EQ(r.outcome(), v1::TOOL_RAN) << r.denial_reason();
  EXPECT_EQ(r.stdout(), "small file\n");

  // A file that does not validate (an unknown key) is not swapped in: cat stays allowed.
  Publish({"/usr/bin/cat"}, "bogus: 1\n");
  ASSERT_TRUE(reloader_->WaitForAttemptsForTest(2, 10000));
  EXPECT_EQ(reloader_->reload_errors(), 1u);
  EXPECT_EQ(Exec({"cat", "small.txt"}).outcome(), v1::TOOL_RAN);
  EXPECT_EQ(Exec({"echo", "still"}).stdout(), "still\n");  // the old policy, whole
}

}  // namespace
}  // namespace gantry::sandbox
