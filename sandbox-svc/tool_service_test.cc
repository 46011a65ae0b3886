// Integration: the real service on a real Unix socket. Callers with other uids are real
// processes (testdata/tool_service_peer.cc: started as root, it drops to a test uid and
// then connects), so the service sees their uid the way it sees any caller's, from the
// kernel (SO_PEERCRED). In-process REQ/DEALER clients run as root (uid 0 is mapped too)
// for the envelope, malformed-frame and concurrency tests; the access policy as
// gantry-sandbox --policy runs it; and CURVE over tcp.
#include "sandbox-svc/tool_service.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <zmq.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/curve_keys.h"
#include "common/status.h"
#include "common/zmq_io.h"
#include "gtest/gtest.h"
#include "policy/policy_loader.h"
#include "policy/policy_reloader.h"
#include "sandbox-svc/sandbox_test_support.h"
#include "sandbox-svc/workspace_roots.h"

namespace gantry::sandbox {
namespace {

using testing::ExecCall;
using testing::HostPathExists;
using testing::MakeWorkspace;
using testing::ReadHostFile;

constexpr uid_t kHarnessUid = 4250;   // admitted as principal "default"
constexpr uid_t kWideUid = 4252;      // admitted as principal "wide"
constexpr uid_t kStrangerUid = 4260;  // admitted as nobody
constexpr uid_t kVictimUid = 4251;    // owns a workspace with a 0600 file

std::string TestTmp() { return std::getenv("TEST_TMPDIR"); }

// A fresh directory under /tmp that every uid may traverse (the socket's home: an
// AF_UNIX path holds at most 107 bytes, and TEST_TMPDIR may be longer and private).
std::string SocketDir() {
  char dir[] = "/tmp/gantry-svc-XXXXXX";
  if (mkdtemp(dir) == nullptr || chmod(dir, 0755) != 0) ADD_FAILURE() << "mkdtemp";
  return dir;
}

std::string DotDots(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += "/..";
  return s;
}

void RemoveTree(const std::string& dir) {
  EXPECT_EQ(std::system(absl::StrCat("rm -rf '", dir, "'").c_str()), 0);
}

v1::ToolResult ParseResult(const std::string& body) {
  v1::ToolResult r;
  EXPECT_TRUE(r.ParseFromString(body));
  return r;
}

// Sends `call` from a separate process running as `uid`; its exit status in `*exit`.
v1::ToolResult CallAs(uid_t uid, const std::string& endpoint, const v1::ToolCall& call,
                      int* exit = nullptr) {
  static int n = 0;
  const std::string in = absl::StrCat(TestTmp(), "/peer_in_", ++n);
  const std::string out = in + ".out";
  std::ofstream(in) << call.SerializeAsString();
  const std::string cmd = absl::StrCat("sandbox-svc/tool_service_peer --uid ", uid, " --gid ", uid,
                                       " --endpoint ", endpoint, " --timeout-ms 10000 <", in,
                                       " >", out);
  int status = std::system(cmd.c_str());
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (exit != nullptr) *exit = code;
  EXPECT_TRUE(exit != nullptr || code == 0) << cmd << ": exit " << code;
  return ParseResult(ReadHostFile(out));
}

// What connect() to the socket says to a process running as `uid`: "connected" or an
// errno name.
std::string ProbeAs(uid_t uid, const std::string& endpoint) {
  const std::string out = absl::StrCat(TestTmp(), "/probe_", uid);
  const std::string cmd = absl::StrCat("sandbox-svc/tool_service_peer --probe --uid ", uid,
                                       " --gid ", uid, " --endpoint ", endpoint, " >", out);
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::string text = ReadHostFile(out);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

void ExpectRefused(const v1::ToolResult& r, const std::string& reason, const std::string& call_id) {
  EXPECT_EQ(r.outcome(), v1::TOOL_ERROR) << r.ShortDebugString();
  EXPECT_EQ(r.error().reason(), reason) << r.ShortDebugString();
  EXPECT_EQ(r.error().code(), "PERMISSION_DENIED");
  EXPECT_EQ(r.call_id(), call_id);
  EXPECT_TRUE(r.stdout().empty() && r.stderr().empty() && r.execs().empty());
}

// A policy in which each service account of `grants` is granted its executables (bare
// names, resolved in the sandbox's view) without further rules.
std::shared_ptr<const policy::Snapshot> PolicyOf(
    const SandboxViewResolver& resolver,
    const std::vector<std::pair<std::string, std::vector<std::string>>>& grants) {
  std::string accounts, rules;
  int key = 1;
  for (const auto& [principal, exes] : grants) {
    absl::StrAppend(&accounts, "    - {name: ", principal, ", key_sha256: ", std::string(62, '0'),
                    absl::Dec(key++, absl::kZeroPad2), ", priority: batch}\n");
    absl::StrAppend(&rules, "  - service_account: ", principal, "\n    commands:\n");
    for (const auto& exe : exes) {
      absl::StrAppend(&rules, "      - {executable: ", *resolver.Resolve(exe, "/"), "}\n");
    }
  }
  auto loaded = policy::LoadPolicyText(
      absl::StrCat("version: 1\n"
                   "defaults: {budgets: {tokens_per_day: 1, tokens_per_month: 1,"
                   " requests_per_minute: 1, concurrent_requests: 1}}\n"
                   "models: []\n"
                   "principals:\n  service_accounts:\n",
                   accounts, "grants:\n", rules),
      "service.yaml");
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  return loaded.ok() ? *loaded : nullptr;
}

class ToolServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::RequireRoot()) GTEST_SKIP() << "not root (recorded as a failure)";
    ws_ = MakeWorkspace("service_ws", {{"small.txt", "small file\n"}});
    SandboxViewResolver resolver(ws_);
    SandboxOptions options;
    options.policy = [policy = PolicyOf(resolver, {{"default", {"cat", "sleep", "echo"}},
                                                   {"wide", {"cat", "touch"}}})] {
      return policy;
    };
    options.workspace_roots = {TestTmp()};
    sandbox_ = std::make_unique<Sandbox>(options);
    dir_ = SocketDir();
    ToolServiceOptions service_options;
    service_options.endpoint = absl::StrCat("ipc://", dir_, "/sandbox.sock");
    // Open to every uid, so that a stranger reaches the uid check (the file mode is only
    // the first fence; SocketFileAndPath shows the default).
    service_options.socket_mode = 0666;
    service_options.peer_uids = {{0, "default"}, {kHarnessUid, "default"}, {kWideUid, "wide"}};
    service_options.workers = 2;
    service_options.queue_capacity = 8;
    service_ = std::make_unique<ToolService>(*sandbox_, service_options);
    ASSERT_TRUE(service_->Start().ok());
  }
  void TearDown() override {
    if (service_) service_->Stop();
    if (!dir_.empty()) RemoveTree(dir_);
  }
  v1::ToolCall Call(const std::string& id, const std::vector<std::string>& argv,
                    const std::string& workspace = "") {
    v1::ToolCall c = ExecCall(workspace.empty() ? ws_ : workspace, argv);
    c.set_call_id(id);
    c.mutable_grant()->set_exec_rules("default");
    return c;
  }
  v1::ToolCall ReadCall(const std::string& id, const std::string& workspace, const std::string& path) {
    v1::ToolCall c;
    c.set_call_id(id);
    c.set_workspace(workspace);
    c.mutable_read_file()->set_path(path);
    return c;
  }
  // One call from an in-process REQ client (uid 0).
  v1::ToolResult CallAsRoot(const v1::ToolCall& call) {
    zmq::socket_t req(context_, zmq::socket_type::req);
    req.set(zmq::sockopt::linger, 0);
    req.connect(service_->endpoint());
    EXPECT_TRUE(SendFrames(req, {call.SerializeAsString()}).ok());
    auto frames = RecvFrames(req, 10000);
    EXPECT_TRUE(frames.ok()) << frames.status();
    return frames.ok() ? ParseResult(frames->back()) : v1::ToolResult();
  }
  std::string ws_, dir_;
  zmq::context_t context_{1};
  std::unique_ptr<Sandbox> sandbox_;
  std::unique_ptr<ToolService> service_;
};

TEST_F(ToolServiceTest, ReqClientGetsResultsUnderTheSameCallId) {
  EXPECT_TRUE(absl::StartsWith(service_->endpoint(), "ipc:///tmp/gantry-svc-"));
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
  EXPECT_EQ(r.denial_reason(),
            "rule:default_deny: no grant of 'default' names executable '/usr/bin/rm'");
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

// An admitted uid's calls run under its principal, whatever the call leaves out: an
// empty exec_rules is the caller's principal, not "no rules" and not another's.
TEST_F(ToolServiceTest, AnAdmittedUidRunsUnderItsOwnPrincipal) {
  v1::ToolCall cat = Call("call_cat", {"cat", "small.txt"});
  cat.mutable_grant()->clear_exec_rules();
  v1::ToolResult r = CallAs(kHarnessUid, service_->endpoint(), cat);
  EXPECT_EQ(r.outcome(), v1::TOOL_RAN) << r.ShortDebugString();
  EXPECT_EQ(r.stdout(), "small file\n");
  // touch is granted to "wide" only: for the harness's uid it is denied by its rules.
  v1::ToolCall touch = Call("call_touch", {"touch", "made.txt"});
  touch.mutable_grant()->clear_exec_rules();
  touch.mutable_grant()->add_write_paths("**");
  r = CallAs(kHarnessUid, service_->endpoint(), touch);
  EXPECT_EQ(r.outcome(), v1::TOOL_DENIED) << r.ShortDebugString();
  EXPECT_FALSE(HostPathExists(ws_ + "/made.txt"));
}

// Issue 17's attack: an unprivileged local user sends one ToolCall naming another
// user's workspace, to read that user's 0600 file (the service runs each call as the
// workspace's owner) or to write there. Before: the file came back. Now: the stranger's
// uid maps to no principal, every call is refused with sandbox_peer_unknown, and
// nothing runs. The control shows the calls are live: from an admitted uid the same read
// returns the file.
TEST_F(ToolServiceTest, AnUnknownUidCannotReadOrWriteAnotherUsersFiles) {
  const std::string victim =
      MakeWorkspace("victim_ws", {{"secret.txt", "the victim's secret\n"}}, kVictimUid);
  ASSERT_EQ(chmod((victim + "/secret.txt").c_str(), 0600), 0);
  const uint64_t refused_before = service_->stats().refused_peer;

  v1::ToolResult r = CallAs(kStrangerUid, service_->endpoint(),
                            ReadCall("call_steal", victim, "secret.txt"));
  ExpectRefused(r, "sandbox_peer_unknown", "call_steal");
  EXPECT_TRUE(absl::StrContains(r.error().message(), absl::StrCat("uid ", kStrangerUid)));
  r = CallAs(kStrangerUid, service_->endpoint(), Call("call_cat", {"cat", "secret.txt"}, victim));
  ExpectRefused(r, "sandbox_peer_unknown", "call_cat");
  v1::ToolCall write;
  write.set_call_id("call_write");
  write.set_workspace(victim);
  write.mutable_grant()->add_write_paths("**");
  write.mutable_write_file()->set_path("planted.txt");
  write.mutable_write_file()->set_content("planted\n");
  r = CallAs(kStrangerUid, service_->endpoint(), write);
  ExpectRefused(r, "sandbox_peer_unknown", "call_write");

  EXPECT_EQ(service_->stats().refused_peer, refused_before + 3);
  EXPECT_EQ(ReadHostFile(victim + "/secret.txt"), "the victim's secret\n");
  EXPECT_FALSE(HostPathExists(victim + "/planted.txt"));
  // Control: the same read from an admitted uid runs (as the workspace's owner).
  r = CallAs(kHarnessUid, service_->endpoint(), ReadCall("call_ok", victim, "secret.txt"));
  EXPECT_EQ(r.outcome(), v1::TOOL_RAN) << r.ShortDebugString();
  EXPECT_EQ(r.stdout(), "the victim's secret\n");
}

// Fail closed: a call that names another principal's rules is refused, never run under
// them and never run under the caller's own instead.
TEST_F(ToolServiceTest, AMismatchingExecRulesIsRefused) {
  v1::ToolCall touch = Call("call_borrow", {"touch", "borrowed.txt"});
  touch.mutable_grant()->set_exec_rules("wide");
  touch.mutable_grant()->add_write_paths("**");
  v1::ToolResult r = CallAs(kHarnessUid, service_->endpoint(), touch);
  ExpectRefused(r, "sandbox_principal_mismatch", "call_borrow");
  EXPECT_TRUE(absl::StrContains(r.error().message(), "'wide'")) << r.error().message();
  ExpectRefused(CallAsRoot(touch), "sandbox_principal_mismatch", "call_borrow");
  EXPECT_FALSE(HostPathExists(ws_ + "/borrowed.txt"));
  EXPECT_EQ(service_->stats().refused_principal, 2u);
  // Control: the uid whose principal is "wide" runs the same call.
  r = CallAs(kWideUid, service_->endpoint(), touch);
  EXPECT_EQ(r.outcome(), v1::TOOL_RAN) << r.ShortDebugString();
  EXPECT_TRUE(HostPathExists(ws_ + "/borrowed.txt"));
}

TEST_F(ToolServiceTest, WorkspacesOutsideTheRootsAreRefused) {
  // A directory outside the root, with a file the call would read.
  const std::string outside = SocketDir();
  std::ofstream(outside + "/outside.txt") << "outside\n";
  struct Case {
    std::string name, workspace, reason;
  };
  const std::string tmp = TestTmp();
  ASSERT_EQ(symlink(outside.c_str(), (tmp + "/link_out").c_str()), 0);
  std::vector<Case> cases = {
      {"outside", outside, "sandbox_workspace_outside_roots"},
      {"dotdot", absl::StrCat(ws_, DotDots(30), outside),
       "sandbox_workspace_outside_roots"},
      {"symlink", tmp + "/link_out", "sandbox_workspace_outside_roots"},
      {"the root itself", tmp, "sandbox_workspace_outside_roots"},
  };
  // Beneath the root, but through a directory another user can change: the victim could
  // swap "ws" for a link between the check and the open.
  const std::string owned = MakeWorkspace("owned_parent", {{"ws/outside.txt", "outside\n"}}, kVictimUid);
  cases.push_back({"a parent owned by a user", owned + "/ws", "sandbox_workspace_unsafe"});
  const std::string group = MakeWorkspace("group_parent", {{"ws/outside.txt", "outside\n"}}, 0);
  ASSERT_EQ(chmod(group.c_str(), 0775), 0);
  cases.push_back({"a group-writable parent", group + "/ws", "sandbox_workspace_unsafe"});
  // Owned by a user but by root's group: the call would run with gid 0.
  const std::string gid0 = MakeWorkspace("gid0_ws", {{"outside.txt", "outside\n"}});
  ASSERT_EQ(chown(gid0.c_str(), testing::kTestUid, 0), 0);
  cases.push_back({"root's group", gid0, "sandbox_workspace_unsafe"});
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    v1::ToolResult r = CallAsRoot(ReadCall("call_" + c.name, c.workspace, "outside.txt"));
    EXPECT_EQ(r.outcome(), v1::TOOL_ERROR) << r.ShortDebugString();
    EXPECT_EQ(r.error().reason(), c.reason) << r.error().message();
    EXPECT_TRUE(r.stdout().empty());
  }
  // Beneath the root through a sticky, world-writable directory whose entry root owns:
  // allowed (no one else can rename the entry).
  const std::string sticky = MakeWorkspace("sticky_parent", {{"ws/outside.txt", "inside\n"}}, 0);
  ASSERT_EQ(chmod(sticky.c_str(), 01777), 0);
  v1::ToolResult r = CallAsRoot(ReadCall("call_sticky", sticky + "/ws", "outside.txt"));
  EXPECT_EQ(r.outcome(), v1::TOOL_RAN) << r.ShortDebugString();
  EXPECT_EQ(r.stdout(), "inside\n");
  // The same with the entry owned by a user: refused.
  ASSERT_EQ(chown((sticky + "/ws").c_str(), kVictimUid, kVictimUid), 0);
  r = CallAsRoot(ReadCall("call_sticky_user", sticky + "/ws", "outside.txt"));
  EXPECT_EQ(r.error().reason(), "sandbox_workspace_unsafe") << r.ShortDebugString();
  unlink((tmp + "/link_out").c_str());
  RemoveTree(outside);
}

// The root rule itself, without a service.
TEST(CheckWorkspaceTest, BeneathARootAndNeverRoot) {
  if (!testing::RequireRoot()) GTEST_SKIP() << "not root (recorded as a failure)";
  const std::string root = MakeWorkspace("root_a", {{"ws/x", "x\n"}}, 0);
  const std::string sibling = MakeWorkspace("root_a_x", {{"ws/x", "x\n"}}, 0);
  EXPECT_TRUE(CheckWorkspace(root + "/ws", {root}, 65534, 65534).ok());
  EXPECT_TRUE(CheckWorkspace(root + "/ws", {"/nonexistent", root + "/"}, 65534, 65534).ok());
  // A name that merely starts with the root's is not beneath it.
  absl::Status s = CheckWorkspace(sibling + "/ws", {root}, 65534, 65534);
  EXPECT_EQ(ReasonOf(s), "sandbox_workspace_outside_roots") << s;
  EXPECT_EQ(ReasonOf(CheckWorkspace(root, {root}, 65534, 65534)), "sandbox_workspace_outside_roots");
  EXPECT_EQ(ReasonOf(CheckWorkspace(root + "/ws", {"/"}, 65534, 65534)),
            "sandbox_workspace_outside_roots");
  // Root owns the workspace: the call runs as the fallback ids, which must not be root's.
  EXPECT_EQ(ReasonOf(CheckWorkspace(root + "/ws", {root}, 0, 65534)), "sandbox_workspace_unsafe");
  EXPECT_EQ(ReasonOf(CheckWorkspace(root + "/ws", {}, 65534, 0)), "sandbox_workspace_unsafe");
  EXPECT_TRUE(CheckWorkspace(root + "/ws", {}, 65534, 65534).ok());
}

TEST(ToolServiceSocketTest, SocketFileAndPath) {
  if (!testing::RequireRoot()) GTEST_SKIP() << "not root (recorded as a failure)";
  const std::string ws = MakeWorkspace("socket_ws", {{"small.txt", "small file\n"}});
  SandboxOptions options;
  options.workspace_roots = {TestTmp()};
  Sandbox sandbox(options);
  const std::string dir = SocketDir();
  const std::string path = dir + "/s.sock";
  ToolServiceOptions o;
  o.endpoint = "ipc://" + path;  // the default mode: 0600
  o.peer_uids = {{kHarnessUid, "default"}};
  auto service = std::make_unique<ToolService>(sandbox, o);
  ASSERT_TRUE(service->Start().ok());
  struct stat st;
  ASSERT_EQ(lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  // Even an admitted uid cannot connect through a file mode that shuts it out.
  EXPECT_EQ(ProbeAs(kHarnessUid, o.endpoint), "EACCES");
  // A second service cannot take a live socket's path.
  ToolService second(sandbox, o);
  absl::Status taken = second.Start();
  EXPECT_EQ(taken.code(), absl::StatusCode::kUnavailable) << taken;
  EXPECT_TRUE(absl::StrContains(taken.message(), "in use")) << taken;
  // Stop removes the file; a stale socket file is replaced; other files are never removed.
  service->Stop();
  EXPECT_FALSE(HostPathExists(path));
  o.socket_mode = 0660;
  o.socket_gid = kHarnessUid;
  {
    ToolService again(sandbox, o);
    ASSERT_TRUE(again.Start().ok());
    ASSERT_EQ(lstat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0660u);
    EXPECT_EQ(st.st_gid, kHarnessUid);
  }
  std::ofstream(dir + "/file") << "keep\n";
  o.endpoint = "ipc://" + dir + "/file";
  ToolService on_file(sandbox, o);
  EXPECT_FALSE(on_file.Start().ok());
  EXPECT_EQ(ReadHostFile(dir + "/file"), "keep\n");
  // tcp without CURVE is no endpoint of this service.
  o.endpoint = "tcp://127.0.0.1:*";
  ToolService tcp(sandbox, o);
  EXPECT_EQ(tcp.Start().code(), absl::StatusCode::kInvalidArgument);
  RemoveTree(dir);
}

// CURVE over tcp: the client's public key is its identity. A listed key runs under its
// principal; an unknown key and a plain (NULL) client are refused in the handshake and
// never deliver a call. The Unix socket keeps working next to the ZAP handler.
TEST(ToolServiceCurveTest, TheClientKeyIsTheIdentity) {
  if (!testing::RequireRoot()) GTEST_SKIP() << "not root (recorded as a failure)";
  if (!CurveSupported()) GTEST_SKIP() << "libzmq without CURVE";
  const std::string ws = MakeWorkspace("curve_ws", {{"small.txt", "small file\n"}});
  SandboxViewResolver resolver(ws);
  SandboxOptions options;
  options.policy = [policy = PolicyOf(resolver, {{"default", {"cat"}}})] { return policy; };
  options.workspace_roots = {TestTmp()};
  Sandbox sandbox(options);
  auto server = GenerateCurveKeyPair();
  auto client = GenerateCurveKeyPair();
  auto stranger = GenerateCurveKeyPair();
  ASSERT_TRUE(server.ok() && client.ok() && stranger.ok());
  const std::string dir = SocketDir();
  ToolServiceOptions o;
  o.endpoint = "ipc://" + dir + "/s.sock";
  o.peer_uids = {{0, "default"}};
  o.curve_endpoint = "tcp://127.0.0.1:*";
  o.curve_secret_z85 = server->secret_z85;
  o.peer_keys = {{client->public_z85, "default"}};
  ToolService service(sandbox, o);
  ASSERT_TRUE(service.Start().ok());
  ASSERT_TRUE(absl::StartsWith(service.curve_endpoint(), "tcp://127.0.0.1:"));

  zmq::context_t context(1);
  auto ask = [&](const CurveKeyPair* keys, const std::string& endpoint, const std::string& rules_name,
                 int timeout_ms) -> absl::StatusOr<v1::ToolResult> {
    zmq::socket_t dealer(context, zmq::socket_type::dealer);
    dealer.set(zmq::sockopt::linger, 0);
    if (keys != nullptr) {
      EXPECT_TRUE(ConfigureCurveClient(dealer.handle(), {keys->public_z85, keys->secret_z85,
                                                         server->public_z85})
                      .ok());
    }
    dealer.connect(endpoint);
    v1::ToolCall call = ExecCall(ws, {"cat", "small.txt"});
    call.mutable_grant()->set_exec_rules(rules_name);
    EXPECT_TRUE(SendFrames(dealer, {"", call.SerializeAsString()}).ok());
    auto frames = RecvFrames(dealer, timeout_ms);
    if (!frames.ok()) return frames.status();
    return ParseResult(frames->back());
  };
  auto ran = ask(&*client, service.curve_endpoint(), "", 10000);
  ASSERT_TRUE(ran.ok()) << ran.status();
  EXPECT_EQ(ran->outcome(), v1::TOOL_RAN) << ran->ShortDebugString();
  EXPECT_EQ(ran->stdout(), "small file\n");
  auto borrowed = ask(&*client, service.curve_endpoint(), "wide", 10000);
  ASSERT_TRUE(borrowed.ok()) << borrowed.status();
  ExpectRefused(*borrowed, "sandbox_principal_mismatch", "call_test");
  EXPECT_EQ(ask(&*stranger, service.curve_endpoint(), "", 1500).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(ask(nullptr, service.curve_endpoint(), "", 1500).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_GE(service.stats().refused_handshakes, 1u);
  auto local = ask(nullptr, service.endpoint(), "", 10000);
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(local->outcome(), v1::TOOL_RAN) << local->ShortDebugString();
  service.Stop();
  RemoveTree(dir);
}

// The service as gantry-sandbox --policy runs it: the rules of each call come from the
// policy in force, for the caller's principal, and a changed policy file applies to the
// next call (inotify), while a broken one leaves the last good policy in force.
class PolicyServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::RequireRoot()) GTEST_SKIP() << "not root (recorded as a failure)";
    ws_ = MakeWorkspace("policy_ws", {{"small.txt", "small file\n"}});
    path_ = absl::StrCat(TestTmp(), "/policy.yaml");
    Publish({"/usr/bin/echo"});
    auto reloader = policy::PolicyReloader::Create(path_);
    ASSERT_TRUE(reloader.ok()) << reloader.status();
    reloader_ = *std::move(reloader);
    ASSERT_TRUE(reloader_->StartWatching().ok());
    SandboxOptions options;
    policy::PolicyReloader* r = reloader_.get();
    options.policy = [r] { return r->Current(); };
    options.workspace_roots = {TestTmp()};
    sandbox_ = std::make_unique<Sandbox>(options);
    dir_ = SocketDir();
    ToolServiceOptions service_options;
    service_options.endpoint = absl::StrCat("ipc://", dir_, "/sandbox.sock");
    service_options.peer_uids = {{0, "agent"}};
    service_ = std::make_unique<ToolService>(*sandbox_, service_options);
    ASSERT_TRUE(service_->Start().ok());
    req_.set(zmq::sockopt::linger, 0);
    req_.connect(service_->endpoint());
  }
  void TearDown() override {
    if (service_) service_->Stop();
    if (!dir_.empty()) RemoveTree(dir_);
  }
  // Writes a policy granting `executables` to the user "agent", atomically (rename).
  void Publish(const std::vector<std::string>& executables, const std::string& extra = "") {
    const std::string text = testing::PolicyGranting("agent", executables, extra);
    const std::string tmp = path_ + ".tmp";
    std::ofstream(tmp) << text;
    ASSERT_EQ(std::rename(tmp.c_str(), path_.c_str()), 0);
  }
  v1::ToolResult Exec(const std::vector<std::string>& argv) {
    v1::ToolCall c = ExecCall(ws_, argv);  // no exec_rules: the caller's principal
    v1::ToolResult r;
    EXPECT_TRUE(SendFrames(req_, {c.SerializeAsString()}).ok());
    auto frames = RecvFrames(req_, 10000);
    EXPECT_TRUE(frames.ok()) << frames.status();
    if (frames.ok()) {
      EXPECT_TRUE(r.ParseFromString(frames->back()));
    }
    return r;
  }
  std::string ws_, path_, dir_;
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
