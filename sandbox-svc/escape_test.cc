// The escape suite: each test tries to get out of the sandbox in one way and asserts
// both the refusal and that no side effect happened on the host. Each prints
// "ESCAPE <name>: attempts=N successes=M" (docs/sandbox.md has the table).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "policy/command_policy.h"
#include "policy/policy_loader.h"
#include "sandbox-svc/command_rules.h"
#include "sandbox-svc/sandbox.h"
#include "sandbox-svc/sandbox_test_support.h"

namespace gantry::sandbox {
namespace {

using testing::EscapeTally;
using testing::ExecCall;
using testing::HostPathExists;
using testing::MakeWorkspace;
using testing::ReadHostFile;

// Escape tests own this uid, so that counting its processes sees only theirs.
constexpr uid_t kUid = 4243;

v1::ToolResult Exec(const std::string& ws, const std::vector<std::string>& argv,
                    v1::ToolCall* base = nullptr) {
  SandboxOptions options;
  options.isolation_only = true;
  v1::ToolCall call = base ? *base : ExecCall(ws, argv);
  if (base) {
    call.set_workspace(ws);
    for (const auto& a : argv) call.mutable_exec()->add_argv(a);
  }
  if (call.limits().wall_ms() == 0) call.mutable_limits()->set_wall_ms(10000);
  return Sandbox(options).Run(call);
}

v1::ToolResult Sh(const std::string& ws, const std::string& script) {
  return Exec(ws, {"sh", "-c", script});
}

class EscapeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::RequireRoot()) GTEST_SKIP() << "not root (recorded as a failure)";
    ws_ = MakeWorkspace(::testing::UnitTest::GetInstance()->current_test_info()->name(),
                        {{"a.txt", "original\n"}, {"src/main.c", "int main;\n"}}, kUid);
  }
  std::string ws_;
};

TEST_F(EscapeTest, WriteReadOnlyWorkspace) {
  EscapeTally t("write into the read-only workspace");
  auto r = Sh(ws_, "echo pwned > /workspace/a.txt; echo pwned > /workspace/new.txt; "
                   "rm -f /workspace/src/main.c; mkdir /workspace/d; chmod 777 /workspace/a.txt");
  EXPECT_EQ(r.outcome(), v1::TOOL_RAN);
  EXPECT_TRUE(absl::StrContains(r.stderr(), "Read-only file system")) << r.stderr();
  t.Attempt(ReadHostFile(ws_ + "/a.txt") != "original\n", "a.txt overwritten");
  t.Attempt(HostPathExists(ws_ + "/new.txt"), "new.txt created");
  t.Attempt(!HostPathExists(ws_ + "/src/main.c"), "src/main.c removed");
  t.Attempt(HostPathExists(ws_ + "/d"), "directory created");
  struct stat st;
  stat((ws_ + "/a.txt").c_str(), &st);
  t.Attempt((st.st_mode & 0777) == 0777, "chmod applied");
  // A granted path is writable, the rest still is not.
  v1::ToolCall call = ExecCall(ws_, {});
  call.mutable_grant()->add_write_paths("src/**");
  auto g = Exec(ws_, {"sh", "-c", "echo ok > /workspace/src/new.c; echo no > /workspace/b.txt"},
                &call);
  EXPECT_EQ(ReadHostFile(ws_ + "/src/new.c"), "ok\n") << g.stderr();
  t.Attempt(HostPathExists(ws_ + "/b.txt"), "write beside a granted path");
  EXPECT_EQ(t.successes(), 0);
}

TEST_F(EscapeTest, CreateFileOutsideWorkspace) {
  EscapeTally t("create a file outside the workspace");
  const std::string marker = absl::StrCat("gantry-escape-", getpid());
  auto r = Sh(ws_, absl::StrCat("for d in / /usr /etc /tmp /workspace/.. /proc /dev /var; do "
                                "echo x > $d/", marker, "; done; echo done"));
  EXPECT_EQ(r.outcome(), v1::TOOL_RAN);
  for (const char* d : {"", "/usr", "/etc", "/tmp", "/proc", "/dev", "/var"}) {
    t.Attempt(HostPathExists(absl::StrCat(d, "/", marker)), absl::StrCat(d, "/", marker));
  }
  const std::string parent = ws_.substr(0, ws_.rfind('/'));
  t.Attempt(HostPathExists(absl::StrCat(parent, "/", marker)), "workspace parent");
  EXPECT_EQ(t.successes(), 0);
}

TEST_F(EscapeTest, FollowSymlinkOut) {
  EscapeTally t("follow a symlink out of the workspace");
  const std::string secret_dir = ws_ + "-outside";
  mkdir(secret_dir.c_str(), 0755);
  std::ofstream(secret_dir + "/secret.txt") << "TOPSECRET\n";
  ASSERT_EQ(symlink((secret_dir + "/secret.txt").c_str(), (ws_ + "/abs_link").c_str()), 0);
  ASSERT_EQ(symlink("../../../../../../../../etc/passwd", (ws_ + "/rel_link").c_str()), 0);
  ASSERT_EQ(symlink(secret_dir.c_str(), (ws_ + "/dir_link").c_str()), 0);
  auto r = Sh(ws_, "cat abs_link rel_link dir_link/secret.txt; echo pwned > dir_link/new");
  t.Attempt(absl::StrContains(r.stdout(), "TOPSECRET"), "secret read through a link");
  t.Attempt(absl::StrContains(r.stdout(), "root:"), "/etc/passwd read through a link");
  t.Attempt(HostPathExists(secret_dir + "/new"), "write through a link");
  // The file tools refuse the same paths before anything runs.
  SandboxOptions options;
  for (const char* path : {"abs_link", "rel_link", "dir_link/secret.txt", "../a.txt"}) {
    v1::ToolCall call = ExecCall(ws_, {});
    call.mutable_read_file()->set_path(path);
    auto f = Sandbox(options).Run(call);
    EXPECT_EQ(f.outcome(), v1::TOOL_DENIED) << path;
    t.Attempt(absl::StrContains(f.stdout(), "TOPSECRET") || absl::StrContains(f.stdout(), "root:"),
              absl::StrCat("read_file ", path));
  }
  // A write grant over a link that points out.
  v1::ToolCall call = ExecCall(ws_, {});
  call.mutable_grant()->add_write_paths("**");
  call.mutable_write_file()->set_path("dir_link/new2");
  call.mutable_write_file()->set_content("pwned");
  auto w = Sandbox(options).Run(call);
  EXPECT_EQ(w.outcome(), v1::TOOL_DENIED);
  t.Attempt(HostPathExists(secret_dir + "/new2"), "write_file through a link");
  EXPECT_EQ(t.successes(), 0);
}

TEST_F(EscapeTest, ReadShadowAndRouterKeys) {
  EscapeTally t("read /etc/shadow and the router's key files");
  const std::string keys = ws_ + "-router-keys";
  mkdir(keys.c_str(), 0700);
  std::ofstream(keys + "/server.key") << "-----BEGIN PRIVATE KEY----- ROUTERKEY\n";
  std::ofstream(keys + "/api_keys.yaml") << "ROUTERKEY: sha256\n";
  const std::string rel = absl::StrCat("../", keys.substr(keys.rfind('/') + 1));
  // The superuser's home and pid 1's root are attack targets on any Linux host.
  const std::string su_home = std::string("/") + "root";
  auto r = Sh(ws_, absl::StrCat("cat /etc/shadow; cat ", keys, "/server.key; cat ", rel,
                                "/api_keys.yaml; cat ", su_home, "/.ssh/id_rsa ", su_home,
                                "/.bash_history; cat /proc/1/root", "/etc/shadow; ls /home ",
                                su_home));
  EXPECT_EQ(r.outcome(), v1::TOOL_RAN);
  t.Attempt(r.stdout().find("root:") != std::string::npos, "/etc/shadow");
  t.Attempt(absl::StrContains(r.stdout(), "ROUTERKEY"), "router keys");
  t.Attempt(absl::StrContains(r.stdout(), "PRIVATE"), "ssh key");
  EXPECT_EQ(t.successes(), 0);
}

TEST_F(EscapeTest, ConnectToHostLoopback) {
  EscapeTally t("connect to a listener on the host's loopback");
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(listener, 8), 0);
  socklen_t len = sizeof(addr);
  getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  auto r = Exec(ws_, {"bash", "-c",
                      absl::StrCat("echo hi > /dev/tcp/127.0.0.1/", port, " && echo CONNECTED; ",
                                   "ls /sys/class/net 2>/dev/null; cat /proc/net/dev")});
  EXPECT_EQ(r.outcome(), v1::TOOL_RAN);
  t.Attempt(absl::StrContains(r.stdout(), "CONNECTED"), "connect succeeded inside");
  int accepted = accept(listener, nullptr, nullptr);
  t.Attempt(accepted >= 0, "the host listener accepted a connection");
  if (accepted >= 0) close(accepted);
  close(listener);
  // Only loopback exists inside.
  EXPECT_FALSE(absl::StrContains(r.stdout(), "eth")) << r.stdout();
  EXPECT_EQ(t.successes(), 0);
}

TEST_F(EscapeTest, ResolveHostName) {
  EscapeTally t("resolve a host name");
  for (const char* host : {"localhost", "example.com", "deb.debian.org"}) {
    auto r = Exec(ws_, {"getent", "hosts", host});
    EXPECT_EQ(r.outcome(), v1::TOOL_RAN);
    t.Attempt(r.exit_code() == 0 && !r.stdout().empty(), host);
  }
  auto r = Sh(ws_, "cat /etc/resolv.conf /etc/hosts");
  t.Attempt(!r.stdout().empty(), "resolver configuration visible");
  EXPECT_EQ(t.successes(), 0);
}

TEST_F(EscapeTest, ForkBomb) {
  EscapeTally t("fork bomb");
  v1::ToolCall call = ExecCall(ws_, {});
  call.mutable_limits()->set_max_processes(32);
  call.mutable_limits()->set_wall_ms(4000);
  auto r = Exec(ws_, {"bash", "-c", "b() { b | b & }; b; sleep 2; echo survived"}, &call);
  EXPECT_NE(r.outcome(), v1::TOOL_ERROR) << r.error().message();
  t.Attempt(testing::CountProcessesOf(kUid) > 0, "processes outlived the call");
  // The host can still fork freely, and the sandbox still serves calls.
  auto after = Exec(ws_, {"true"});
  t.Attempt(after.outcome() != v1::TOOL_RAN || after.exit_code() != 0, "sandbox unusable after");
  EXPECT_EQ(t.successes(), 0);
}

TEST_F(EscapeTest, MemoryBomb) {
  EscapeTally t("memory bomb");
  v1::ToolCall call = ExecCall(ws_, {});
  call.mutable_limits()->set_address_space_bytes(256ull << 20);
  call.mutable_limits()->set_wall_ms(10000);
  // tail buffers a line that never ends.
  auto r = Exec(ws_, {"tail", "/dev/zero"}, &call);
  EXPECT_EQ(r.outcome(), v1::TOOL_RAN);
  EXPECT_NE(r.exit_code(), 0);
  t.Attempt(r.exit_code() == 0, "allocation did not fail");
  t.Attempt(r.usage().max_rss_bytes() > (300ull << 20), "resident memory above the limit");
  // Filling the /tmp tmpfs stops at its size.
  call.mutable_limits()->set_tmp_bytes(4ull << 20);
  auto fill = Exec(ws_, {"sh", "-c", "head -c 64000000 /dev/zero > /tmp/fill; ls -l /tmp/fill"},
                   &call);
  t.Attempt(absl::StrContains(fill.stdout(), "64000000"), "tmpfs size limit");
  EXPECT_EQ(t.successes(), 0);
}

TEST_F(EscapeTest, EndlessLoop) {
  EscapeTally t("endless loop");
  v1::ToolCall call = ExecCall(ws_, {});
  call.mutable_limits()->set_wall_ms(1000);
  const auto start = std::chrono::steady_clock::now();
  auto r = Exec(ws_, {"sh", "-c", "sleep 1000 & while :; do :; done"}, &call);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(r.outcome(), v1::TOOL_TIMED_OUT);
  t.Attempt(r.outcome() != v1::TOOL_TIMED_OUT, "not timed out");
  t.Attempt(took > std::chrono::seconds(5), "timeout took too long");
  t.Attempt(testing::CountProcessesOf(kUid) > 0, "a process outlived the timeout");
  // The CPU limit ends a busy loop even with a long wall limit.
  call.mutable_limits()->set_wall_ms(20000);
  call.mutable_limits()->set_cpu_seconds(1);
  auto cpu = Exec(ws_, {"sh", "-c", "while :; do :; done"}, &call);
  EXPECT_EQ(cpu.outcome(), v1::TOOL_RAN);
  t.Attempt(cpu.term_signal() == 0, "CPU limit not applied");
  EXPECT_EQ(t.successes(), 0);
}

TEST_F(EscapeTest, HugeOutput) {
  EscapeTally t("huge output");
  v1::ToolCall call = ExecCall(ws_, {});
  call.mutable_limits()->set_stdout_cap_bytes(65536);
  call.mutable_limits()->set_stderr_cap_bytes(1024);
  call.mutable_limits()->set_wall_ms(10000);
  auto r = Exec(ws_, {"yes"}, &call);
  EXPECT_EQ(r.stdout().size(), 65536u);
  EXPECT_TRUE(r.stdout_truncated());
  t.Attempt(r.stdout().size() > 65536, "stdout cap exceeded");
  t.Attempt(r.outcome() == v1::TOOL_TIMED_OUT, "ran until the wall limit");
  auto e = Exec(ws_, {"sh", "-c", "yes >&2"}, &call);
  EXPECT_EQ(e.stderr().size(), 1024u);
  EXPECT_TRUE(e.stderr_truncated());
  t.Attempt(e.stderr().size() > 1024, "stderr cap exceeded");
  EXPECT_EQ(t.successes(), 0);
}

TEST_F(EscapeTest, PtraceSibling) {
  EscapeTally t("ptrace of a sibling");
  // perl-base is essential in Debian; syscall 101 is ptrace on x86-64, 16 PTRACE_ATTACH.
  auto r = Sh(ws_, "sleep 5 & p=$!; perl -e '$r = syscall(101, 16, $ARGV[0], 0, 0); "
                   "print \"ret=$r\\n\"' $p; perl -e '$r = syscall(101, 16, 1, 0, 0); "
                   "print \"ret=$r\\n\"'; kill $p");
  EXPECT_EQ(r.outcome(), v1::TOOL_RAN);
  EXPECT_TRUE(absl::StrContains(r.stdout(), "ret=-1")) << r.stdout() << r.stderr();
  t.Attempt(absl::StrContains(r.stdout(), "ret=0"), "PTRACE_ATTACH succeeded");
  // The host's processes are not even visible.
  auto ps = Sh(ws_, absl::StrCat("ls /proc/", getpid(), " 2>&1; ls /proc | grep -c '^[0-9]'"));
  t.Attempt(!absl::StrContains(ps.stdout(), "No such file"), "host pid visible");
  EXPECT_EQ(t.successes(), 0);
}

TEST_F(EscapeTest, ProcTricks) {
  EscapeTally t("/proc tricks");
  setenv("GANTRY_ESCAPE_MARKER", "HOSTSECRET42", 1);
  const std::string sysrq_before = ReadHostFile("/proc/sys/kernel/sysrq");
  auto r = Sh(ws_, "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; "
                   "cat /proc/1/root""/etc/shadow 2>&1; ls /proc/1/root"" 2>&1; "
                   "echo 1 > /proc/sys/kernel/sysrq 2>&1; echo c > /proc/sysrq-trigger 2>&1; "
                   "echo x > /proc/sys/vm/drop_caches 2>&1; head -c 16 /proc/kcore 2>&1; "
                   "cat /proc/self/cgroup; ls -l /proc/self/fd");
  EXPECT_EQ(r.outcome(), v1::TOOL_RAN);
  t.Attempt(absl::StrContains(r.stdout(), "HOSTSECRET42"), "host environment read");
  t.Attempt(absl::StrContains(r.stdout(), "root:"), "shadow through /proc/1/root");
  t.Attempt(ReadHostFile("/proc/sys/kernel/sysrq") != sysrq_before, "sysrq written");
  auto w = Sh(ws_, "echo 1 > /proc/sys/kernel/sysrq && echo WROTE");
  t.Attempt(absl::StrContains(w.stdout(), "WROTE"), "/proc/sys writable");
  EXPECT_EQ(t.successes(), 0);
}

TEST_F(EscapeTest, SetuidBinary) {
  EscapeTally t("setuid binary");
  // A set-user-ID root copy of id(1) in the workspace, and the host's own ones.
  const std::string copy = ws_ + "/suid_id";
  ASSERT_EQ(std::system(absl::StrCat("cp /usr/bin/id '", copy, "'").c_str()), 0);
  ASSERT_EQ(chown(copy.c_str(), 0, 0), 0);
  ASSERT_EQ(chmod(copy.c_str(), 04755), 0);
  auto r = Exec(ws_, {"/workspace/suid_id", "-u"});
  EXPECT_EQ(r.outcome(), v1::TOOL_RAN);
  t.Attempt(r.stdout() == "0\n", "euid 0 from a setuid copy");
  auto s = Sh(ws_, "for f in /usr/bin/* /usr/sbin/*; do if [ -u \"$f\" ]; then "
                   "\"$f\" --help >/dev/null 2>&1; echo \"$f\"; fi; done; "
                   "mount -t tmpfs none /workspace 2>&1; su -c id 2>&1; id -u");
  t.Attempt(absl::StrContains(s.stdout(), "uid=0("), "root through a host setuid binary");
  EXPECT_TRUE(absl::EndsWith(s.stdout(), "1000\n")) << s.stdout();
  EXPECT_EQ(t.successes(), 0);
}

TEST_F(EscapeTest, WrapperHidesDeniedExecutable) {
  EscapeTally t("a wrapper that hides a denied executable");
  ASSERT_EQ(symlink("/usr/bin/rm", (ws_ + "/cat").c_str()), 0);
  // The same executables allowed twice, both decided by the policy: as command rules
  // built in code (policy/command_policy.h) and as the commands of the principal
  // "tools" in an access policy file (what gantry-sandbox --policy loads).
  SandboxViewResolver resolver(ws_);
  std::vector<std::string> paths;
  std::vector<policy::CommandRule> rules;
  for (const char* exe : {"env", "nice", "timeout", "xargs", "sh", "bash", "find", "cat",
                          "echo", "nohup", "stdbuf", "git"}) {
    auto path = resolver.Resolve(exe, "/workspace");
    if (!path.ok()) continue;
    paths.push_back(*path);
    rules.emplace_back();
    rules.back().executable = *path;
  }
  auto built = policy::LoadCommandPolicy("tools", rules);
  ASSERT_TRUE(built.ok()) << built.status();
  const std::string policy_text = testing::PolicyGranting("tools", paths);
  auto policy = policy::LoadPolicyText(policy_text, "escape.yaml");
  ASSERT_TRUE(policy.ok()) << policy.status();
  SandboxOptions built_options;
  built_options.policy = [snapshot = *built] { return snapshot; };
  SandboxOptions policy_options;
  policy_options.policy = [snapshot = *policy] { return snapshot; };
  const std::vector<std::vector<std::string>> attempts = {
      {"env", "rm", "a.txt"},
      {"env", "-i", "FOO=1", "rm", "a.txt"},
      {"env", "-S", "rm a.txt"},
      {"nice", "-n", "5", "rm", "a.txt"},
      {"timeout", "5", "rm", "a.txt"},
      {"nohup", "rm", "a.txt"},
      {"stdbuf", "-o0", "rm", "a.txt"},
      {"xargs", "rm"},
      {"sh", "-c", "rm a.txt"},
      {"bash", "-c", "exec rm a.txt"},
      {"sh", "-c", "cat a.txt; rm a.txt"},
      {"sh", "-c", "$(echo rm) a.txt"},
      {"find", ".", "-name", "a.txt", "-exec", "rm", "{}", ";"},
      {"env", "nice", "timeout", "5", "sh", "-c", "rm a.txt"},
      {"./cat", "a.txt"},
      {"/usr/bin/../bin/rm", "a.txt"},
      {"env", "PATH=/workspace", "cat", "a.txt"},
      {"git", "-c", "alias.x=!rm a.txt", "x"},
  };
  for (const SandboxOptions* options : {&built_options, &policy_options}) {
    for (const auto& argv : attempts) {
      v1::ToolCall call = ExecCall(ws_, argv);
      call.mutable_grant()->set_exec_rules("tools");
      call.mutable_grant()->add_write_paths("**");
      call.mutable_exec()->set_stdin("a.txt\n");
      auto r = Sandbox(*options).Run(call);
      EXPECT_EQ(r.outcome(), v1::TOOL_DENIED) << argv[0] << " " << argv.back();
      EXPECT_TRUE(absl::StartsWith(r.denial_reason(), "rule:")) << r.denial_reason();
      t.Attempt(r.outcome() != v1::TOOL_DENIED || !HostPathExists(ws_ + "/a.txt"),
                absl::StrCat(argv[0], " ... ", argv.back(), ": ", r.denial_reason()));
    }
    // The allowed form still runs.
    v1::ToolCall ok = ExecCall(ws_, {"env", "cat", "a.txt"});
    ok.mutable_grant()->set_exec_rules("tools");
    auto r = Sandbox(*options).Run(ok);
    EXPECT_EQ(r.outcome(), v1::TOOL_RAN) << r.denial_reason();
    EXPECT_EQ(r.stdout(), "original\n");
  }
  EXPECT_EQ(t.successes(), 0);
}

// --- Exec supervision (issue 17): every exec in the sandboxed tree is decided. ---

// A policy for principal "tools" whose commands are `rules` (YAML flow mappings) and
// `executables` (granted without further rules).
std::string ToolsPolicy(const std::vector<std::string>& executables,
                        const std::vector<std::string>& rules = {}) {
  std::string extra;
  for (const auto& r : rules) absl::StrAppend(&extra, "      - ", r, "\n");
  return testing::PolicyGranting("tools", executables, extra);
}

// The whole workspace is a write grant unless `write_paths` says otherwise.
v1::ToolResult RunUnder(const std::string& policy_text, const std::string& ws,
                        const std::vector<std::string>& argv, const std::string& stdin_data = "",
                        const std::vector<std::string>& write_paths = {"**"}) {
  auto policy = policy::LoadPolicyText(policy_text, "escape.yaml");
  EXPECT_TRUE(policy.ok()) << policy.status() << "\n" << policy_text;
  if (!policy.ok()) return {};
  SandboxOptions options;
  options.policy = [snapshot = *policy] { return snapshot; };
  v1::ToolCall call = ExecCall(ws, argv);
  call.mutable_grant()->set_exec_rules("tools");
  for (const auto& path : write_paths) call.mutable_grant()->add_write_paths(path);
  call.mutable_exec()->set_stdin(stdin_data);
  call.mutable_limits()->set_wall_ms(10000);
  return Sandbox(options).Run(call);
}

// Something was refused: the command up front, or an exec inside.
bool Refused(const v1::ToolResult& r) {
  return r.outcome() == v1::TOOL_DENIED || r.execs_denied() > 0;
}

bool Have(const char* exe) { return access(exe, X_OK) == 0; }

// Runs `script` with sh on the host in `dir` (set-up only); false on failure.
bool HostSh(const std::string& dir, const std::string& script) {
  return std::system(absl::StrCat("cd '", dir, "' && (", script, ") >/dev/null 2>&1").c_str()) == 0;
}

// The workspace belongs to kUid, so root's git must be told to trust it.
constexpr char kGitInit[] =
    "G='git -c safe.directory=* -c user.name=t -c user.email=t@t' && "
    "$G init -q . && $G add a.txt src && $G commit -q -m one && echo changed > a.txt";

TEST_F(EscapeTest, IssueSeventeenReproductions) {
  EscapeTally t("issue 17's argv tricks, with the exec supervisor");
  const std::string victim = ws_ + "/victim.txt";
  std::ofstream(victim) << "keep\n";
  ASSERT_EQ(chown(victim.c_str(), kUid, kUid), 0);
  // 1. xargs --eof takes an optional argument: `id` is the command.
  auto r1 = RunUnder(ToolsPolicy({"/usr/bin/xargs", "/usr/bin/cat"}), ws_,
                     {"xargs", "--eof", "id", "cat"});
  t.Attempt(absl::StrContains(r1.stdout(), "uid="), "xargs --eof id cat ran id");
  EXPECT_TRUE(Refused(r1)) << r1.ShortDebugString();
  // 2. xargs --max-lines: `rm` is the command.
  auto r2 = RunUnder(ToolsPolicy({"/usr/bin/xargs", "/usr/bin/cat"}), ws_,
                     {"xargs", "--max-lines", "rm", "cat", "victim.txt"});
  t.Attempt(!HostPathExists(victim), "xargs --max-lines rm deleted victim.txt");
  EXPECT_TRUE(Refused(r2)) << r2.ShortDebugString();
  // 6. find: '+' ends -exec only right after {}.
  auto r6 = RunUnder(ToolsPolicy({"/usr/bin/find"},
                                 {"{executable: /usr/bin/cat, operands: {globs: [\"/workspace/**\"]}}"}),
                     ws_, {"find", ".", "-name", "a.txt", "-exec", "cat", "+", "/usr/lib/os-release", ";"});
  t.Attempt(absl::StrContains(r6.stdout(), "ID="), "find -exec cat + read /usr/lib/os-release");
  EXPECT_TRUE(Refused(r6)) << r6.ShortDebugString();
  if (!Have("/usr/bin/git")) {
    ADD_FAILURE() << "git is not installed: the git reproductions did not run";
    return;
  }
  ASSERT_TRUE(HostSh(ws_, kGitInit));
  ASSERT_TRUE(HostSh(ws_, absl::StrCat("mkdir -p out && git init -q --bare evil && "
                                       "git -C evil config core.fsmonitor 'touch /workspace/out/M4' && "
                                       "chown -R ", kUid, ":", kUid, " .")));
  const std::string git_status = "{executable: /usr/bin/git, subcommands: [status]}";
  // 3. env -S splits on \_ : git -C . -c alias.x=!id x status.
  auto r3 = RunUnder(ToolsPolicy({"/usr/bin/env"}, {git_status}), ws_,
                     {"env", "-S", "git -C .\\_-c\\_\"alias.x=!id;:\"\\_x status"});
  t.Attempt(absl::StrContains(r3.stdout(), "uid="), "env -S git alias ran id");
  EXPECT_TRUE(Refused(r3)) << r3.ShortDebugString();
  // 4. git --git-dir=evil --work-tree=. status runs the bare repository's fsmonitor.
  auto r4 = RunUnder(ToolsPolicy({}, {git_status}), ws_,
                     {"git", "--git-dir=evil", "--work-tree=.", "status"});
  t.Attempt(HostPathExists(ws_ + "/out/M4"), "git --git-dir=evil ran core.fsmonitor");
  // 4b. The same bare repository found by starting git inside it (no --git-dir for the
  // rules to see): git refuses to use it (safe.bareRepository=explicit in the sandbox).
  auto r4b = RunUnder(ToolsPolicy({}, {"{executable: /usr/bin/git}"}), ws_,
                      {"git", "-C", "evil", "status"});
  t.Attempt(HostPathExists(ws_ + "/out/M4"), "git -C evil status ran core.fsmonitor");
  EXPECT_TRUE(absl::StrContains(r4b.stderr(), "bare repository")) << r4b.ShortDebugString();
  // 5. A multi-call name below a wrapper: ./git-difftool diff -x CMD.
  ASSERT_EQ(symlink("/usr/bin/git", (ws_ + "/git-difftool").c_str()), 0);
  auto r5 = RunUnder(ToolsPolicy({"/usr/bin/env"}, {"{executable: /usr/bin/git, subcommands: [diff]}"}),
                     ws_, {"env", "./git-difftool", "diff", "-y", "-x", "touch /workspace/out/M5"});
  t.Attempt(HostPathExists(ws_ + "/out/M5"), "git-difftool -x ran its command");
  EXPECT_TRUE(Refused(r5)) << r5.ShortDebugString();
  // (4) is live: git did try to run the hook, and that exec was refused.
  bool hook_refused = false;
  for (const auto& e : r4.execs()) {
    if (!e.allowed() && absl::c_linear_search(e.argv(), "touch /workspace/out/M4")) {
      hook_refused = true;
    }
  }
  // (Or the rules refuse --git-dir up front, and nothing of git runs.)
  EXPECT_TRUE(hook_refused || r4.outcome() == v1::TOOL_DENIED) << r4.ShortDebugString();
  EXPECT_EQ(t.successes(), 0);
}

// Found by a red team: a policy granted `/workspace/tool`, and the workspace link
// `tool -> /lib64/ld-linux-x86-64.so.2` made the loader a granted program, which runs
// any file (a copy of id, with --library-path) and any host program past its own rules
// (cat of a file outside its operand globs). Now a workspace path whose links leave the
// workspace names nothing, the loader is granted only by its own path, and without a
// granted workspace program the workspace is mounted noexec.
TEST_F(EscapeTest, AWorkspaceLinkToTheLoaderIsNotAGrantedProgram) {
  EscapeTally t("the loader through a granted workspace path");
  ASSERT_TRUE(HostSh(ws_, absl::StrCat("cp /usr/bin/id idcopy && mkdir -p lib && "
                                       "ln -s /lib64/ld-linux-x86-64.so.2 tool && "
                                       "ln -s /usr/bin/id idlink && chown -R ", kUid, ":", kUid, " .")));
  const std::string cat = "{executable: /usr/bin/cat, operands: {globs: [\"/workspace/**\"]}}";
  const std::string policy = ToolsPolicy({"/workspace/tool", "/workspace/idlink"}, {cat});
  auto copy = RunUnder(policy, ws_, {"/workspace/tool", "--library-path", "/workspace/lib",
                                     "/workspace/idcopy"}, "", /*write_paths=*/{});
  t.Attempt(absl::StrContains(copy.stdout(), "uid="), "the loader ran a copy of id");
  EXPECT_TRUE(Refused(copy)) << copy.ShortDebugString();
  auto host = RunUnder(policy, ws_, {"/workspace/tool", "/usr/bin/cat", "/etc/localtime"}, "",
                       /*write_paths=*/{});
  t.Attempt(absl::StrContains(host.stdout(), "TZif"), "the loader ran cat past its globs");
  EXPECT_TRUE(Refused(host)) << host.ShortDebugString();
  auto link = RunUnder(policy, ws_, {"/workspace/idlink"}, "", /*write_paths=*/{});
  t.Attempt(absl::StrContains(link.stdout(), "uid="), "a workspace link to id ran id");
  EXPECT_EQ(link.outcome(), v1::TOOL_DENIED) << link.ShortDebugString();
  // The loader by its own path, not granted: refused like any other program.
  auto direct = RunUnder(ToolsPolicy({"/usr/bin/env"}, {cat}), ws_,
                         {"env", "/lib64/ld-linux-x86-64.so.2", "/usr/bin/cat", "/etc/localtime"},
                         "", /*write_paths=*/{});
  t.Attempt(absl::StrContains(direct.stdout(), "TZif"), "env ran the loader");
  EXPECT_TRUE(Refused(direct)) << direct.ShortDebugString();
  // No workspace program is granted (a path that names nothing, the link to the loader
  // or an absent file, does not count): nothing there can be mapped executable.
  auto map = RunUnder(ToolsPolicy({"/usr/bin/perl", "/workspace/tool", "/workspace/absent"}), ws_,
                      {"perl", "-e",
                       "open F, '<', '/workspace/idcopy' or die; "
                       "print syscall(9, 0, 4096, 5, 2, fileno(F), 0) == -1 ? \"refused: $!\" : 'mapped'"},
                      "", /*write_paths=*/{});
  EXPECT_EQ(map.stdout(), "refused: Operation not permitted") << map.ShortDebugString();
  t.Attempt(map.stdout() == "mapped", "PROT_EXEC mapping of a workspace file");
  // Control: a workspace program that is granted (a regular file there) still runs.
  auto granted = RunUnder(ToolsPolicy({"/workspace/idcopy"}), ws_, {"/workspace/idcopy", "-u"}, "",
                          /*write_paths=*/{});
  EXPECT_EQ(granted.stdout(), "1000\n") << granted.ShortDebugString();
  EXPECT_EQ(t.successes(), 0);
}

// A second red team's findings: each made the supervisor decide one file while the
// kernel ran another, or widened a write grant.
TEST_F(EscapeTest, SecondRedTeamDecidedOneFileRanAnother) {
  EscapeTally t("a second red team: cwd sharing, /dev, hard links, a deep cwd, a linked grant");
  ASSERT_TRUE(HostSh(ws_, absl::StrCat(
      "mkdir -p out ro src/deep secrets && echo TOP-SECRET > secrets/key && "
      "printf '#!/usr/bin/cat\n' > tool && chmod 755 tool && ln tool out/tool && "
      "printf '/usr/bin/cat\\0' > ro/args && ln ro/args out/args && chmod 444 ro/args && "
      "ln -s . build && chown -R ", kUid, ":", kUid, " .")));
  // 1. clone(CLONE_FS): a process sharing the exec'ing one's cwd could chdir between the
  // check and the kernel's lookup. Refused; fork still works.
  auto fs = RunUnder(ToolsPolicy({"/usr/bin/perl"}), ws_,
                     {"perl", "-e",
                      "my $r = syscall(56, 0x200 | 17, 0, 0, 0, 0); if ($r == 0) { syscall(60, 0) } "
                      "print $r == -1 ? \"refused: $!\" : 'cloned'; my $p = fork(); "
                      "if ($p == 0) { exit 0 } waitpid($p, 0); print ' fork ok'"});
  EXPECT_EQ(fs.stdout(), "refused: Operation not permitted fork ok") << fs.ShortDebugString();
  t.Attempt(absl::StartsWith(fs.stdout(), "cloned"), "clone(CLONE_FS)");
  // 2. /dev was a writable tmpfs without noexec: a program copied there could be mapped
  // executable (and exec'd through 1). Read-only now; /dev/null still takes writes.
  auto dev = RunUnder(ToolsPolicy({"/usr/bin/perl"}), ws_,
                      {"perl", "-e",
                       "open(A, '>', '/dev/shm/x') && print 'wrote '; open(B, '>', '/dev/x') && "
                       "print 'wrote '; open(N, '>', '/dev/null') && print(N 'x') && print 'null-ok'"});
  EXPECT_EQ(dev.stdout(), "null-ok") << dev.ShortDebugString();
  t.Attempt(absl::StrContains(dev.stdout(), "wrote"), "a file written into /dev");
  // 3. The executed file has a hard link in a write grant: its "#!" line could be
  // rewritten after the check. Refused whatever it says now.
  auto linked = RunUnder(ToolsPolicy({"/workspace/tool", "/usr/bin/cat"}), ws_, {"/workspace/tool"},
                         "", /*write_paths=*/{"out/**"});
  EXPECT_TRUE(Refused(linked)) << linked.ShortDebugString();
  bool writable_refusal = false;
  for (const auto& e : linked.execs()) writable_refusal |= !e.allowed() && e.rule_id() == "exec_writable";
  EXPECT_TRUE(writable_refusal) << linked.ShortDebugString();
  // 4. A working directory deeper than 4 KiB of path: readlink fails, and relative
  // paths and operands were decided as if in "/" (find -execdir cat read outside cat's
  // globs). Refused now.
  ASSERT_TRUE(HostSh(ws_ + "/src/deep", absl::StrCat(
      "d=$(printf 'a%.0s' $(seq 200)); for i in $(seq 21); do mkdir $d && cd $d; done; "
      "echo x > leaf && mkdir -p workspace/src && ln -s /workspace/secrets/key workspace/src/x; "
      "chown -R ", kUid, ":", kUid, " ", ws_, "/src")));
  auto deep = RunUnder(
      ToolsPolicy({}, {"{executable: /usr/bin/find, operands: {globs: [\"/workspace/**\"]}}",
                       "{executable: /usr/bin/cat, operands: {globs: [\"/workspace/src/**\"]}}"}),
      ws_, {"find", "/workspace/src/deep", "-name", "leaf", "-execdir", "cat", "workspace/src/x", ";"},
      "", /*write_paths=*/{});
  t.Attempt(absl::StrContains(deep.stdout(), "TOP-SECRET"), "find -execdir cat from a deep cwd");
  EXPECT_TRUE(Refused(deep)) << deep.ShortDebugString().substr(0, 2000);
  // 5. execve's path in a mapping of a 0444 file with a hard link in a write grant: its
  // owner can chmod and rewrite it through that name. Refused (exec_unstable).
  auto mapped = RunUnder(ToolsPolicy({"/usr/bin/python3", "/usr/bin/cat"}), ws_,
                         {"python3", "-c",
                          "import ctypes, os\n"
                          "libc = ctypes.CDLL(None, use_errno=True)\n"
                          "libc.mmap.restype = ctypes.c_void_p\n"
                          "libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, "
                          "ctypes.c_int, ctypes.c_int, ctypes.c_long]\n"
                          "fd = os.open('/workspace/ro/args', os.O_RDONLY)\n"
                          "addr = libc.mmap(None, 4096, 1, 2, fd, 0)\n"
                          "argv = (ctypes.c_char_p * 3)(b'/usr/bin/cat', b'/dev/null', None)\n"
                          "libc.execve(ctypes.c_void_p(addr), argv, (ctypes.c_char_p * 1)(None))\n"
                          "print('errno', ctypes.get_errno())\n"},
                         "", /*write_paths=*/{"out/**"});
  EXPECT_EQ(mapped.stdout(), "errno 13\n") << mapped.ShortDebugString();
  t.Attempt(mapped.stdout().empty() && mapped.exit_code() == 0, "exec with its path in a re-writable mapping");
  // 6. A write grant through a workspace link (`build -> .`) bound the whole workspace
  // read-write. A grant reached through a link is not mounted writable now.
  v1::ToolCall call = ExecCall(ws_, {});
  call.mutable_grant()->add_write_paths("build/**");
  auto widened = Exec(ws_, {"sh", "-c", "echo backdoored > /workspace/a.txt; echo done"}, &call);
  EXPECT_EQ(widened.stdout(), "done\n") << widened.ShortDebugString();
  t.Attempt(ReadHostFile(ws_ + "/a.txt") != "original\n", "a.txt written through build -> .");
  EXPECT_EQ(t.successes(), 0);
}

// A third red team's findings (the exec re-check after every allowed exec is tested
// in exec_supervisor_test).
TEST_F(EscapeTest, ThirdRedTeamMemoryVsockAndConcurrentCalls) {
  EscapeTally t("a third red team: memfd, SysV shm, AF_VSOCK, a linked grant file, a concurrent writer");
  // memfd and SysV shared memory are outside every limit (6 GiB pinned past RLIMIT_AS).
  auto mem = RunUnder(ToolsPolicy({"/usr/bin/perl"}), ws_,
                      {"perl", "-e",
                       "my $name = 'x'; my $m = syscall(319, $name, 0);"
                       "print $m == -1 ? 'memfd refused ' : 'memfd ';"
                       "my $s = syscall(29, 0, 1 << 20, 01000 | 0600); print $s == -1 ? 'shm refused ' : 'shm ';"
                       "my $v = syscall(41, 40, 1, 0); print $v == -1 ? 'vsock refused' : 'vsock'"});
  EXPECT_EQ(mem.stdout(), "memfd refused shm refused vsock refused") << mem.ShortDebugString();
  t.Attempt(!absl::StrContains(mem.stdout(), "memfd refused"), "memfd_create");
  t.Attempt(!absl::StrContains(mem.stdout(), "shm refused"), "shmget");
  t.Attempt(!absl::StrContains(mem.stdout(), "vsock refused"), "socket(AF_VSOCK)");
  // A literal file grant with another name (a hard link) would write that name too.
  ASSERT_TRUE(HostSh(ws_, absl::StrCat("mkdir -p other && echo keep > other/config && "
                                       "ln other/config config && chown -R ", kUid, ":", kUid, " .")));
  v1::ToolCall linked = ExecCall(ws_, {});
  linked.mutable_grant()->add_write_paths("config");
  auto wrote = Exec(ws_, {"sh", "-c", "echo changed > /workspace/config; echo done"}, &linked);
  EXPECT_EQ(wrote.stdout(), "done\n") << wrote.ShortDebugString();
  t.Attempt(ReadHostFile(ws_ + "/other/config") != "keep\n", "a hard-linked grant wrote its other name");
  // Calls on one workspace: one that writes it runs alone, so another call's checks of
  // the workspace (an operand's link, the file it runs) hold while it runs. The writer
  // holds the workspace for a second between two writes; a reader started meanwhile
  // sees only the second.
  v1::ToolCall writer = ExecCall(ws_, {});
  writer.mutable_grant()->add_write_paths("out/**");
  ASSERT_TRUE(HostSh(ws_, absl::StrCat("mkdir -p out && chown ", kUid, ":", kUid, " out")));
  std::thread first([&] {
    Exec(ws_, {"sh", "-c", "echo one > /workspace/out/state; sleep 1; echo two > /workspace/out/state"},
         &writer);
  });
  for (int i = 0; i < 500 && ReadHostFile(ws_ + "/out/state") != "one\n"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto reader = Exec(ws_, {"cat", "/workspace/out/state"});
  first.join();
  EXPECT_EQ(reader.stdout(), "two\n") << reader.ShortDebugString();
  t.Attempt(reader.stdout() == "one\n", "a call ran while another call wrote the workspace");
  EXPECT_EQ(t.successes(), 0);
}

// An attempt to run touch(1) on a file its rule does not grant, through programs that
// are granted.
struct ExecAttempt {
  const char* what;
  std::vector<std::string> grant;  // executables granted without further rules
  std::vector<std::string> argv;   // "MARK" is replaced by the attempt's marker path
  bool control;                    // with touch granted too, the marker must appear
  bool refused = true;             // a denial is recorded (false: the path is absent)
};

TEST_F(EscapeTest, ExecSupervisorFamilies) {
  EscapeTally t("denied programs through allowed ones (exec supervisor)");
  ASSERT_TRUE(HostSh(ws_, "mkdir -p out bin && tar cf t.tar a.txt && ln -s /usr/bin/touch bin/cat && "
                          "ln -s /usr/bin/touch out/cat"));
  ASSERT_TRUE(HostSh(ws_, absl::StrCat("chown -R ", kUid, ":", kUid, " .")));
  const std::vector<ExecAttempt> attempts = {
      {"perl -e exec", {"/usr/bin/perl"}, {"perl", "-e", "exec 'touch', 'MARK'"}, true},
      {"perl system of sh -c", {"/usr/bin/perl", "/usr/bin/sh"},
       {"perl", "-e", "system('/bin/sh', '-c', 'touch MARK')"}, true},
      {"perl backticks", {"/usr/bin/perl", "/usr/bin/sh"}, {"perl", "-e", "`touch MARK`"}, true},
      {"perl fork and exec in a grandchild", {"/usr/bin/perl"},
       {"perl", "-e", "if (!fork) { if (!fork) { exec 'touch', 'MARK' } wait; exit } wait"}, true},
      {"awk system()", {"/usr/bin/awk", "/usr/bin/sh"},
       {"awk", "BEGIN { system(\"touch MARK\") }"}, true},
      {"awk pipe to a command", {"/usr/bin/awk", "/usr/bin/sh"},
       {"awk", "BEGIN { print \"x\" | \"touch MARK\" }"}, true},
      {"sed e command", {"/usr/bin/sed", "/usr/bin/sh"},
       {"sed", "-n", "1e touch MARK", "/workspace/a.txt"}, true},
      {"sed s///e flag", {"/usr/bin/sed", "/usr/bin/sh"},
       {"sed", "s|.*|touch MARK|e", "/workspace/a.txt"}, true},
      {"find -execdir", {"/usr/bin/find"},
       {"find", "/workspace/a.txt", "-execdir", "touch", "MARK", ";"}, true},
      {"find -exec through perl", {"/usr/bin/perl", "/usr/bin/find"},
       {"perl", "-e", "exec 'find', '/workspace/a.txt', '-exec', 'touch', 'MARK', ';'"}, true},
      {"tar --to-command", {"/usr/bin/tar", "/usr/bin/sh"},
       {"tar", "-xf", "/workspace/t.tar", "--to-command=touch MARK"}, true},
      {"tar --checkpoint-action=exec", {"/usr/bin/tar", "/usr/bin/sh"},
       {"tar", "-cf", "/dev/null", "--checkpoint=1", "--checkpoint-action=exec=touch MARK",
        "/workspace/a.txt"},
       true},
      {"tar --use-compress-program", {"/usr/bin/tar", "/usr/bin/sh"},
       {"tar", "-tf", "/workspace/t.tar", "--use-compress-program=touch -- MARK"}, true},
      {"timeout --signal", {"/usr/bin/perl", "/usr/bin/timeout"},
       {"perl", "-e", "exec 'timeout', '--signal', 'KILL', '5', 'touch', 'MARK'"}, true},
      {"nice -n", {"/usr/bin/perl", "/usr/bin/nice"},
       {"perl", "-e", "exec 'nice', '-n', '5', 'touch', 'MARK'"}, true},
      {"env -S", {"/usr/bin/perl", "/usr/bin/env"},
       {"perl", "-e", "exec 'env', '-S', 'touch MARK'"}, true},
      {"xargs from stdin", {"/usr/bin/perl", "/usr/bin/xargs"},
       {"perl", "-e", "open(my $x, '|-', 'xargs', 'touch') or die; print $x 'MARK'; close $x"}, true},
      {"busybox-style name: a link named cat", {"/usr/bin/perl", "/usr/bin/cat"},
       {"perl", "-e", "exec '/workspace/bin/cat', 'MARK'"}, false},
      {"PATH pointing at the workspace", {"/usr/bin/perl", "/usr/bin/cat"},
       {"perl", "-e", "$ENV{PATH} = '/workspace/bin'; exec 'cat', 'MARK'"}, false},
      {"exec -a: argv[0] names another program", {"/usr/bin/perl", "/usr/bin/cat"},
       {"perl", "-e", "exec { '/usr/bin/touch' } 'cat', 'MARK'"}, false},
      {"a link in a writable directory", {"/usr/bin/perl", "/usr/bin/touch"},
       {"perl", "-e", "exec '/workspace/out/cat', 'MARK'"}, false},
      {"a copy in the writable /tmp", {"/usr/bin/perl"},
       {"perl", "-e",
        "open(my $i, '<', '/usr/bin/touch'); open(my $o, '>', '/tmp/t'); binmode $i; binmode $o;"
        " local $/; my $d = <$i>; print $o $d; close $o; chmod 0755, '/tmp/t'; exec '/tmp/t', 'MARK'"},
       false},
      {"descriptor inheritance: exec /dev/fd/N", {"/usr/bin/perl"},
       {"perl", "-e", "open(my $f, '<', '/usr/bin/touch'); $^F = 10; exec '/dev/fd/' . fileno($f), 'MARK'"},
       false, false},  // /dev/fd leads to /proc/self/fd, and there is no /proc
      {"/proc/self/exe", {"/usr/bin/perl"},
       {"perl", "-e", "exec '/proc/self/exe', '-e', 'exec q(touch), q(MARK)'"}, false, false},
      {"LD_PRELOAD set by the program", {"/usr/bin/perl", "/usr/bin/cat"},
       {"perl", "-e", "$ENV{LD_PRELOAD} = '/workspace/a.txt'; exec 'touch', 'MARK'"}, true},
      {"git -c core.pager", {"/usr/bin/perl", "/usr/bin/git", "/usr/bin/sh"},
       {"perl", "-e", "exec 'git', '-c', 'core.pager=touch MARK', '-p', 'log'"}, false},
      {"GIT_EXTERNAL_DIFF", {"/usr/bin/perl", "/usr/bin/git", "/usr/bin/sh"},
       {"perl", "-e", "$ENV{GIT_EXTERNAL_DIFF} = 'touch MARK'; exec 'git', 'diff'"}, false},
      {"git -c core.sshCommand", {"/usr/bin/perl", "/usr/bin/git", "/usr/bin/sh"},
       {"perl", "-e", "exec 'git', '-c', 'core.sshCommand=touch MARK', 'ls-remote', 'ssh://h/r'"},
       false},
      {"git alias with !", {"/usr/bin/perl", "/usr/bin/git", "/usr/bin/sh"},
       {"perl", "-e", "exec 'git', '-c', 'alias.x=!touch MARK', 'x'"}, false},
  };
  const bool git = Have("/usr/bin/git") && HostSh(ws_, kGitInit) &&
                   HostSh(ws_, absl::StrCat("chown -R ", kUid, ":", kUid, " ."));
  int n = 0;
  for (const ExecAttempt& a : attempts) {
    const bool needs_git = absl::c_linear_search(a.grant, "/usr/bin/git");
    if (needs_git && !git) {
      ADD_FAILURE() << "git is not installed: " << a.what << " did not run";
      continue;
    }
    for (bool with_touch : {false, true}) {
      if (with_touch && !a.control) continue;
      const std::string mark = absl::StrCat("/workspace/out/M", ++n);
      std::vector<std::string> argv;
      for (const auto& s : a.argv) argv.push_back(absl::StrReplaceAll(s, {{"MARK", mark}}));
      std::vector<std::string> grant = a.grant;
      // touch is in the sandbox, granted only for another file, so that its exec must
      // be refused by the exec supervisor (an absent program would prove less); the
      // control grants it outright.
      std::vector<std::string> rules;
      if (with_touch) {
        grant.push_back("/usr/bin/touch");
      } else {
        rules.push_back("{executable: /usr/bin/touch, operands: {globs: [\"/workspace/out/none\"]}}");
      }
      auto r = RunUnder(ToolsPolicy(grant, rules), ws_, argv);
      const bool marked = HostPathExists(ws_ + mark.substr(strlen("/workspace")));
      if (with_touch) {
        // The control: the same attempt works once touch is granted, so the denial
        // above was the rule's, not a broken attempt; unless the rules refuse the form
        // itself up front (then nothing ran either way).
        EXPECT_TRUE(marked || r.outcome() == v1::TOOL_DENIED) << a.what << ": "
                                                               << r.ShortDebugString();
        continue;
      }
      if (a.refused) EXPECT_TRUE(Refused(r)) << a.what << ": " << r.ShortDebugString();
      t.Attempt(marked, a.what);
    }
  }
  EXPECT_EQ(t.successes(), 0);
}

// Found by a red team: kernel AIO completing an O_DIRECT read into a stopped exec's
// path after the supervisor had read it ran touch and id in a few of ~1400 tries.
// Kernel AIO is denied now; the race cannot even be set up. Also: code written into a
// write grant cannot be mapped executable (the grant is mounted noexec).
TEST_F(EscapeTest, AsyncReadsAndCodeFromWritablePlaces) {
  EscapeTally t("writers racing a stopped exec (AIO, a dying vfork parent); code from a write grant");
  ASSERT_TRUE(HostSh(ws_, absl::StrCat(
      "mkdir -p out && printf '/usr/bin/perl\\0' > A && truncate -s 4096 A && "
      "printf '/usr/bin/touch\\0' > B && truncate -s 4096 B && cp /usr/bin/true out/code && "
      "chown -R ", kUid, ":", kUid, " .")));
  // The red team's race, bounded: a private page holds "/usr/bin/perl" (granted); an
  // O_DIRECT io_submit of B ("/usr/bin/touch") into it races the exec of that page.
  const std::string race = R"(
    my $page = syscall(9, 0, 4096, 3, 0x22, -1, 0); die "mmap" if $page == -1;
    open my $ha, "<", "/workspace/A" or die; sysopen my $hb, "/workspace/B", 040000 or die;
    my $ctx = pack("Q", 0);
    if (syscall(206, 64, unpack("J", pack("p", $ctx))) != 0) { print "io_setup refused: $!
"; exit 0 }
    my $ctxv = unpack("Q", $ctx);
    my $a0 = "perl\0"; my $a1 = "/workspace/out/RACED\0";
    my $argv = pack("JJJ", unpack("J", pack("p", $a0)), unpack("J", pack("p", $a1)), 0);
    my $envp = pack("J", 0); my $ev = "\0" x 256;
    for my $j (1..200) {
      syscall(17, fileno($ha), $page, 4096, 0);
      my $iocb = pack("QLLssLQQqQLL", 0, 0, 0, 0, 0, fileno($hb), $page, 4096, 0, 0, 0, 0);
      my $pp = pack("J", unpack("J", pack("p", $iocb)));
      syscall(209, $ctxv, 1, unpack("J", pack("p", $pp)));
      syscall(59, $page, unpack("J", pack("p", $argv)), unpack("J", pack("p", $envp)));
      syscall(208, $ctxv, 1, 1, unpack("J", pack("p", $ev)), 0);
    })";
  auto r = RunUnder(ToolsPolicy({"/usr/bin/perl"},
                                {"{executable: /usr/bin/touch, operands: {globs: [\"/workspace/out/none\"]}}"}),
                    ws_, {"perl", "-e", race});
  EXPECT_TRUE(absl::StrContains(r.stdout(), "io_setup refused: Operation not permitted"))
      << r.ShortDebugString();
  t.Attempt(HostPathExists(ws_ + "/out/RACED"), "touch ran through an AIO race");
  // Machine code copied into the write grant cannot be mapped executable.
  auto m = RunUnder(ToolsPolicy({"/usr/bin/perl"}), ws_,
                    {"perl", "-e",
                     "open F, '<', '/workspace/out/code' or die; "
                     "print syscall(9, 0, 4096, 5, 2, fileno(F), 0) == -1 ? \"refused: $!\" : 'mapped'"});
  EXPECT_EQ(m.stdout(), "refused: Operation not permitted") << m.ShortDebugString();
  t.Attempt(m.stdout() == "mapped", "PROT_EXEC mapping of a file in a write grant");
  // A second red team: a vfork child made with CLONE_PARENT has, as its parent of
  // record, not the (two-threaded) process whose memory it shares. Refused in seccomp.
  auto c = RunUnder(ToolsPolicy({"/usr/bin/perl"}), ws_,
                    {"perl", "-e",
                     "my $r = syscall(56, 0x8000 | 0x4000 | 0x100 | 17, 0, 0, 0, 0); "
                     "if ($r == 0) { syscall(60, 0) } print $r == -1 ? \"refused: $!\" : 'cloned'"});
  EXPECT_EQ(c.stdout(), "refused: Operation not permitted") << c.ShortDebugString();
  t.Attempt(c.stdout() == "cloned", "clone(CLONE_PARENT | CLONE_VFORK | CLONE_VM)");
  // The second red team's race: a vfork parent killed by its own timer while the
  // child's exec is stopped writes zero at its clear_child_tid, set to point into the
  // child's operand: "/workspace/out/allowed" (granted) becomes "/workspace/out/all".
  // It won within 1-55 tries; now such an exec is checked again at its exec stop.
  const std::string vfork_race = R"(
    for my $i (0..119) {
      my $d = 50 + 25 * $i;
      my $w = fork();
      if ($w == 0) {
        my $buf = "/workspace/out/allowed"; $buf .= "";
        my $path = "/usr/bin/touch"; my $a0 = "touch";
        my $argv = pack("ppQ", $a0, $buf, 0);
        syscall(218, unpack("Q", pack("p", $buf)) + 18);
        my $timer = pack("qqqq", 0, 0, 0, $d);
        syscall(38, 0, $timer, 0);
        if (syscall(58) == 0) { syscall(59, $path, $argv, 0); syscall(60, 127) }
        syscall(60, 0);
      }
      waitpid($w, 0);
      if (-e "/workspace/out/all") { print "raced at $i
"; exit 0 }
    })";
  auto v = RunUnder(ToolsPolicy({"/usr/bin/perl"},
                                {"{executable: /usr/bin/touch, operands: {globs: [\"/workspace/out/allowed\"]}}"}),
                    ws_, {"perl", "-e", vfork_race});
  t.Attempt(HostPathExists(ws_ + "/out/all"), "touch of out/all through a dying vfork parent");
  EXPECT_FALSE(absl::StrContains(v.stdout(), "raced")) << v.ShortDebugString();
  EXPECT_TRUE(HostPathExists(ws_ + "/out/allowed"))
      << "the granted touch never ran: " << v.ShortDebugString().substr(0, 3000);
  EXPECT_EQ(t.successes(), 0);
}

// Found by the fourth red team: operand globs check the words of a command line, and a
// granted program then opened what its own language named (sed '1r FILE', awk's
// getline, dd if=, python3 -c and perl -e from a working directory inside the glob, a
// link inside the glob). Now the globs are also the kernel's rule: the sandbox's init
// gives Landlock exactly the workspace entries they match, for every program of the call.
TEST_F(EscapeTest, FourthRedTeamReadsPastTheOperandGlobs) {
  EscapeTally t("reads past the operand globs (Landlock)");
  ASSERT_TRUE(HostSh(ws_, absl::StrCat("printf 'TOPSECRET\\n' > secret.txt && mkdir -p out && "
                                       "ln -s ../secret.txt src/link && chown -R ", kUid, ":",
                                       kUid, " .")));
  const char* kInSrc = "operands: {globs: [\"/workspace/src/**\"]}";
  std::vector<std::string> rules;
  for (const char* exe : {"/usr/bin/sed", "/usr/bin/awk", "/usr/bin/dd", "/usr/bin/python3",
                          "/usr/bin/perl", "/usr/bin/cat"}) {
    rules.push_back(absl::StrCat("{executable: ", exe, ", ", kInSrc, "}"));
  }
  const std::string policy = ToolsPolicy({"/usr/bin/env"}, rules);
  auto run = [&](std::vector<std::string> argv, const std::string& cwd) {
    auto snapshot = policy::LoadPolicyText(policy, "escape.yaml");
    EXPECT_TRUE(snapshot.ok()) << snapshot.status();
    SandboxOptions options;
    options.policy = [s = *snapshot] { return s; };
    v1::ToolCall call = ExecCall(ws_, argv);
    call.mutable_exec()->set_cwd(cwd);
    call.mutable_grant()->set_exec_rules("tools");
    call.mutable_grant()->add_write_paths("out/**");
    call.mutable_limits()->set_wall_ms(10000);
    return Sandbox(options).Run(call);
  };
  auto leaked = [](const v1::ToolResult& r) {
    return absl::StrContains(r.stdout(), "TOPSECRET") || absl::StrContains(r.stderr(), "TOPSECRET");
  };
  const std::pair<std::vector<std::string>, const char*> kAttempts[] = {
      {{"sed", "1r /workspace/secret.txt", "/workspace/src/main.c"}, "src"},
      {{"awk", "BEGIN{while((getline l < \"/workspace/secret.txt\")>0) print l}"}, "src"},
      {{"dd", "if=/workspace/secret.txt", "status=none"}, "src"},
      {{"python3", "-c", "print(open('/workspace/secret.txt').read())"}, "src"},
      {{"perl", "-e", "open(F,'<','/workspace/secret.txt');print <F>"}, "src"},
      {{"python3", "-c", "print(open('/workspace/src/link').read())"}, "src"},
      {{"env", "python3", "-c", "print(open('../secret.txt').read())"}, "src"},
      {{"python3", "-c", "import os;os.link('/workspace/secret.txt','/workspace/out/h')"}, "src"},
  };
  for (const auto& [argv, cwd] : kAttempts) {
    v1::ToolResult r = run(argv, cwd);
    t.Attempt(leaked(r), absl::StrCat(argv[0], " ", argv[1], " read secret.txt"));
    EXPECT_FALSE(leaked(r)) << r.ShortDebugString();
    // The rules allow each of these (they check words): the kernel is what refuses.
    EXPECT_EQ(r.outcome(), v1::TOOL_RAN) << r.ShortDebugString();
  }
  EXPECT_FALSE(HostPathExists(ws_ + "/out/h"));
  // What the globs match stays readable to the same programs, and the grant writable.
  auto sed = run({"sed", "-n", "1p", "/workspace/src/main.c"}, "src");
  EXPECT_EQ(sed.stdout(), "int main;\n") << sed.ShortDebugString();
  auto py = run({"python3", "-c",
                 "print(open('main.c').read().strip(), sorted(__import__('os').listdir('.')));"
                 "open('/workspace/out/w','w').write('x')"},
                "src");
  EXPECT_EQ(py.stdout(), "int main; ['link', 'main.c']\n") << py.ShortDebugString();
  EXPECT_TRUE(HostPathExists(ws_ + "/out/w"));
  EXPECT_EQ(t.successes(), 0);
}

// Found by the fifth red team: the Landlock domain is the call's command's, and a
// program that command starts cannot be narrowed to its own globs from outside. git
// status (granted without globs: the whole workspace) ran a repository's core.fsmonitor,
// /usr/bin/python3, whose rule allows /workspace/src/** only; python3 then read
// secret.txt. Now the supervisor refuses an exec whose own globs allow less than the
// domain it would inherit (rule exec_scope).
TEST_F(EscapeTest, FifthRedTeamAStartedProgramKeepsItsOwnGlobs) {
  EscapeTally t("a program started inside reads past its own globs");
  if (!Have("/usr/bin/git")) {
    ADD_FAILURE() << "git is not installed";
    return;
  }
  ASSERT_TRUE(HostSh(ws_, absl::StrCat(
      "printf 'TOPSECRET\\n' > secret.txt && cd src && git init -q . && "
      "git -c safe.directory=* config core.fsmonitor /usr/bin/python3 && "
      "printf 'print(open(\"/workspace/secret.txt\").read())\\n' > 2 && cd .. && "
      "chown -R ", kUid, ":", kUid, " .")));
  const std::string policy = ToolsPolicy(
      {}, {"{executable: /usr/bin/git, subcommands: [status]}",
           "{executable: /usr/bin/python3, operands: {globs: [\"/workspace/src/**\"]}}"});
  auto snapshot = policy::LoadPolicyText(policy, "escape.yaml");
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  SandboxOptions options;
  options.policy = [s = *snapshot] { return s; };
  v1::ToolCall call = ExecCall(ws_, {"git", "status"});
  call.mutable_exec()->set_cwd("src");
  call.mutable_grant()->set_exec_rules("tools");
  call.mutable_limits()->set_wall_ms(10000);
  v1::ToolResult r = Sandbox(options).Run(call);
  const bool leaked = absl::StrContains(r.stdout(), "TOPSECRET") ||
                      absl::StrContains(r.stderr(), "TOPSECRET");
  t.Attempt(leaked, "git status ran core.fsmonitor python3 past its globs");
  EXPECT_FALSE(leaked) << r.ShortDebugString();
  EXPECT_EQ(r.outcome(), v1::TOOL_RAN) << r.ShortDebugString();
  bool refused = false;
  for (const auto& e : r.execs()) refused = refused || (!e.allowed() && e.rule_id() == "exec_scope");
  EXPECT_TRUE(refused) << r.ShortDebugString();
  // The same python3 as the call's own command runs, confined to its globs.
  v1::ToolCall own = ExecCall(ws_, {"python3", "-c", "print(open('2').read()[:5])"});
  own.mutable_exec()->set_cwd("src");
  own.mutable_grant()->set_exec_rules("tools");
  own.mutable_limits()->set_wall_ms(10000);
  v1::ToolResult ok = Sandbox(options).Run(own);
  EXPECT_EQ(ok.stdout(), "print\n") << ok.ShortDebugString();
  EXPECT_EQ(t.successes(), 0);
}

}  // namespace
}  // namespace gantry::sandbox
