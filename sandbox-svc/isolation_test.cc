// The isolation layer and the tools, run for real through bubblewrap (as root).
#include <dirent.h>
#include "sandbox-svc/isolation.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "sandbox-svc/sandbox.h"
#include "sandbox-svc/sandbox_test_support.h"
#include "sandbox-svc/seccomp_filter.h"

namespace gantry::sandbox {
namespace {

using testing::ExecCall;
using testing::MakeWorkspace;
using testing::ReadHostFile;

bool Has(const std::vector<std::string>& argv, const std::vector<std::string>& seq) {
  return std::search(argv.begin(), argv.end(), seq.begin(), seq.end()) != argv.end();
}

TEST(BwrapArgvTest, HasEveryLayer) {
  IsolationSpec spec;
  spec.workspace = "/w";
  spec.writable = {"src", "out/x"};
  spec.argv = {"/usr/bin/cat", "a"};
  spec.cwd = "src";
  spec.env = {{"FOO", "bar"}};
  SystemLayout layout{{{"/bin", "usr/bin"}}, {"/lib64"}, {"/etc/ld.so.cache"}};
  auto a = BuildBwrapArgv(spec, layout, {}, true, false, 3, 4, 5);
  for (const char* flag : {"--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc",
                           "--unshare-uts", "--disable-userns", "--die-with-parent",
                           "--new-session", "--clearenv"}) {
    EXPECT_TRUE(Has(a, {flag})) << flag;
  }
  EXPECT_TRUE(Has(a, {"--cap-drop", "ALL"}));
  EXPECT_TRUE(Has(a, {"--ro-bind", "/usr", "/usr"}));
  EXPECT_TRUE(Has(a, {"--symlink", "usr/bin", "/bin"}));
  EXPECT_TRUE(Has(a, {"--ro-bind", "/lib64", "/lib64"}));
  EXPECT_TRUE(Has(a, {"--ro-bind", kStageWorkspace, "/workspace"}));
  // Writable grants are bound from stage paths the set-up bound from descriptors.
  EXPECT_TRUE(Has(a, {"--bind", "/tmp/w0", "/workspace/src"}));
  EXPECT_TRUE(Has(a, {"--bind", "/tmp/w1", "/workspace/out/x"}));
  EXPECT_TRUE(Has(a, {"--bind", kStageTmp, "/tmp"}));
  EXPECT_TRUE(Has(a, {"--remount-ro", "/"}));
  EXPECT_TRUE(Has(a, {"--chdir", "/workspace/src"}));
  EXPECT_TRUE(Has(a, {"--setenv", "FOO", "bar"}));
  // The init comes from descriptor 5, read-only, and runs first with the call's rules.
  EXPECT_TRUE(Has(a, {"--perms", "0555", "--ro-bind-data", "5", kSandboxInit}));
  EXPECT_TRUE(Has(a, {"--seccomp", "3", "--json-status-fd", "4", "--", kSandboxInit}));
  EXPECT_TRUE(Has(a, {"--exec-tree", "/usr", "--exec-tree", "/lib64", "--read-tree", "/etc"}));
  EXPECT_TRUE(Has(a, {"--write-tree", "/workspace/src", "--write-tree", "/workspace/out/x"}));
  EXPECT_TRUE(Has(a, {"--landlock=best-effort", "--", "/usr/bin/cat", "a"}));
  EXPECT_EQ(a.back(), "a");
  // Without staging (not root): a sized tmpfs and the workspace by its path.
  auto b = BuildBwrapArgv(spec, layout, {}, false, false, 3, 4, 5);
  EXPECT_TRUE(Has(b, {"--tmpfs", "/tmp"}));
  EXPECT_TRUE(Has(b, {"--ro-bind", "/w", "/workspace"}));
  EXPECT_TRUE(Has(b, {"--bind", "/w/src", "/workspace/src"}));
  // With the programs known, /usr is the program view: assembled by the set-up at its
  // stage path (root), or by bwrap from the same plan.
  spec.only_programs = true;
  ProgramView view;
  view.dirs = {"/usr/bin"};
  view.links = {{"/usr/lib64", "lib/x86_64-linux-gnu"}};
  view.files = {"/usr/bin/cat"};
  view.trees = {"/usr/share/git-core"};
  auto staged = BuildBwrapArgv(spec, layout, view, true, false, 3, 4, 5);
  EXPECT_TRUE(Has(staged, {"--ro-bind", kStageUsr, "/usr"}));
  EXPECT_FALSE(Has(staged, {"--ro-bind", "/usr", "/usr"}));
  auto unstaged = BuildBwrapArgv(spec, layout, view, false, false, 3, 4, 5);
  EXPECT_TRUE(Has(unstaged, {"--tmpfs", "/usr", "--dir", "/usr/bin", "--symlink",
                             "lib/x86_64-linux-gnu", "/usr/lib64", "--ro-bind", "/usr/bin/cat",
                             "/usr/bin/cat", "--ro-bind", "/usr/share/git-core",
                             "/usr/share/git-core", "--remount-ro", "/usr"}));
  EXPECT_FALSE(Has(unstaged, {"--ro-bind", "/usr", "/usr"}));
  spec.only_programs = false;
  // A read scope is passed list by list, and then Landlock is required.
  spec.read_scope.all_of = {{"/workspace/src/**", "/workspace/a.txt"}, {"/workspace/**"}};
  auto scoped = BuildBwrapArgv(spec, layout, {}, true, false, 3, 4, 5);
  EXPECT_TRUE(Has(scoped, {"--read-one-of", "2", "/workspace/src/**", "/workspace/a.txt",
                           "--read-one-of", "1", "/workspace/**", "--landlock=required", "--"}));
  spec.read_scope = {};
  // With a namespace joined ahead of time, bwrap does not make another.
  auto c = BuildBwrapArgv(spec, layout, {}, true, true, 3, 4, 5);
  EXPECT_FALSE(Has(c, {"--unshare-net"}));
}

TEST(SeccompTest, CompilesAndCoversTheDeniedCalls) {
  auto program = SeccompProgram();
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->size() % 8, 0u);  // struct sock_filter is 8 bytes
  const auto& names = DeniedSyscallNames();
  for (const char* n : {"ptrace", "mount", "kexec_load", "bpf", "perf_event_open", "keyctl",
                        "unshare", "setns"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  }
}

class SandboxToolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::RequireRoot()) GTEST_SKIP() << "not root (recorded as a failure)";
    ws_ = MakeWorkspace(::testing::UnitTest::GetInstance()->current_test_info()->name(),
                        {{"lines.txt", "one\ntwo\nthree\nfour\n"},
                         {"src/a.c", "int a;\n// TODO fix\n"},
                         {"src/b.h", "// todo later\n"},
                         {"docs/readme.md", "hello\n"}});
  }
  v1::ToolResult Run(v1::ToolCall call) {
    call.set_workspace(ws_);
    return Sandbox(options_).Run(call);
  }
  v1::ToolResult Exec(const std::vector<std::string>& argv) {
    SandboxOptions o;
    o.isolation_only = true;
    return Sandbox(o).Run(ExecCall(ws_, argv));
  }
  std::string ws_;
  SandboxOptions options_;
};

TEST_F(SandboxToolsTest, ExecReportsExitSignalStdinEnvAndCwd) {
  auto r = Exec({"sh", "-c", "exit 7"});
  EXPECT_EQ(r.outcome(), v1::TOOL_RAN);
  EXPECT_EQ(r.exit_code(), 7);
  EXPECT_EQ(r.resolved_executable(), Exec({"sh", "-c", ":"}).resolved_executable());
  auto k = Exec({"sh", "-c", "kill -TERM $$"});
  EXPECT_EQ(k.term_signal(), 15);
  SandboxOptions o;
  o.isolation_only = true;
  v1::ToolCall call = ExecCall(ws_, {"sh", "-c", "cat; echo \"$FOO\"; pwd"});
  call.mutable_exec()->set_stdin("from stdin\n");
  (*call.mutable_exec()->mutable_env())["FOO"] = "bar";
  call.mutable_exec()->set_cwd("src");
  auto s = Sandbox(o).Run(call);
  EXPECT_EQ(s.stdout(), "from stdin\nbar\n/workspace/src\n") << s.stderr();
  EXPECT_EQ(s.call_id(), "call_test");
  EXPECT_EQ(s.task_id(), "task_test");
  EXPECT_GT(s.usage().wall_us(), 0u);
}

TEST_F(SandboxToolsTest, TheCommandRunsUnderTheCallsLimits) {
  SandboxOptions o;
  o.isolation_only = true;
  // The sandbox has no /proc: prlimit(1) asks the kernel for its own limits.
  v1::ToolCall call =
      ExecCall(ws_, {"prlimit", "--noheadings", "--raw", "--output", "RESOURCE,SOFT,HARD"});
  call.mutable_limits()->set_cpu_seconds(7);
  call.mutable_limits()->set_max_processes(33);
  call.mutable_limits()->set_max_open_files(99);
  call.mutable_limits()->set_max_file_bytes(12345);
  call.mutable_limits()->set_address_space_bytes(1ull << 30);
  auto r = Sandbox(o).Run(call);
  ASSERT_EQ(r.outcome(), v1::TOOL_RAN) << r.stderr();
  // Soft and hard limit both (units: seconds, bytes, processes).
  const std::pair<const char*, const char*> kWant[] = {
      {"CPU", "7"}, {"FSIZE", "12345"}, {"NPROC", "33"}, {"NOFILE", "99"},
      {"AS", "1073741824"}, {"CORE", "0"}};
  for (const auto& [name, value] : kWant) {
    const std::string want = absl::StrCat("\n", name, " ", value, " ", value, "\n");
    EXPECT_TRUE(absl::StrContains(absl::StrCat("\n", r.stdout()), want)) << want << "\n"
                                                                         << r.stdout();
  }
}

TEST_F(SandboxToolsTest, AWritablePathSwappedForALinkAfterItsCheckIsNotBound) {
  // As if a concurrent call had replaced the checked directory "out" with a link to a
  // host directory between the service's check and the mount: the set-up opens it
  // again without following links, so the call fails and nothing is bound.
  const std::string outside = ws_ + "-outside";
  ASSERT_EQ(std::system(absl::StrCat("rm -rf '", outside, "' && mkdir '", outside, "'").c_str()), 0);
  ASSERT_EQ(symlink(outside.c_str(), (ws_ + "/out").c_str()), 0);
  IsolationSpec spec;
  spec.workspace = ws_;
  spec.writable = {"out"};
  spec.argv = {"/usr/bin/touch", "/workspace/out/pwned"};
  auto r = RunIsolated(spec, ChoosePrivilegeDrop(ws_, 65534, 65534));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "a writable path changed after its check"))
      << r.status();
  EXPECT_FALSE(testing::HostPathExists(outside + "/pwned"));
  // The same directory without the link is bound and written.
  ASSERT_EQ(unlink((ws_ + "/out").c_str()), 0);
  ASSERT_EQ(mkdir((ws_ + "/out").c_str(), 0777), 0);
  ASSERT_EQ(chown((ws_ + "/out").c_str(), testing::kTestUid, testing::kTestGid), 0);
  auto ok = RunIsolated(spec, ChoosePrivilegeDrop(ws_, 65534, 65534));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->exit_code, 0) << ok->stderr_data;
  EXPECT_TRUE(testing::HostPathExists(ws_ + "/out/pwned"));
}

TEST_F(SandboxToolsTest, TheProgramViewHoldsOnlyWhatTheProgramsNeed) {
  IsolationSpec spec;
  spec.workspace = ws_;
  spec.only_programs = true;
  spec.programs = {"/usr/bin/ls", "/usr/bin/python3"};
  auto run = [&](std::vector<std::string> argv) {
    spec.argv = std::move(argv);
    auto r = RunIsolated(spec, ChoosePrivilegeDrop(ws_, 65534, 65534));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : RunOutcome{};
  };
  // The program directories hold the granted programs, nothing else (the init comes
  // from memory, outside /usr).
  RunOutcome bin = run({"/usr/bin/ls", "-1", "/usr/bin"});
  EXPECT_EQ(bin.exit_code, 0) << bin.stderr_data;
  for (absl::string_view name : absl::StrSplit(bin.stdout_data, '\n', absl::SkipEmpty())) {
    EXPECT_TRUE(name == "ls" || absl::StartsWith(name, "python3")) << name;
  }
  // The libraries are the ones these programs load, not the host's hundreds.
  int host_libs = 0;
  if (DIR* d = opendir("/usr/lib/x86_64-linux-gnu")) {
    while (readdir(d) != nullptr) ++host_libs;
    closedir(d);
  }
  RunOutcome libs = run({"/usr/bin/ls", "-1", "/usr/lib/x86_64-linux-gnu"});
  EXPECT_EQ(libs.exit_code, 0) << libs.stderr_data;
  EXPECT_TRUE(absl::StrContains(libs.stdout_data, "libc.so.6"));
  EXPECT_FALSE(absl::StrContains(libs.stdout_data, "libzmq")) << libs.stdout_data;
  EXPECT_LT(std::count(libs.stdout_data.begin(), libs.stdout_data.end(), '\n'), host_libs / 4);
  // No data the programs do not read: /usr/share holds nothing of ls or python.
  RunOutcome share = run({"/usr/bin/ls", "/usr/share/doc"});
  EXPECT_NE(share.exit_code, 0);
  // An interpreter runs with its library tree and its extension modules' libraries.
  RunOutcome py = run({"/usr/bin/python3", "-c", "import json, ssl, hashlib; print(json.dumps([1]))"});
  EXPECT_EQ(py.exit_code, 0) << py.stderr_data;
  EXPECT_EQ(py.stdout_data, "[1]\n");
  // A program that is not granted is not there to run, whatever runs it.
  RunOutcome id = run({"/usr/bin/python3", "-c", "import os; print(os.path.exists('/usr/bin/id'))"});
  EXPECT_EQ(id.stdout_data, "False\n") << id.stderr_data;
}

TEST_F(SandboxToolsTest, MalformedCallsAreToolErrorsOrDenials) {
  SandboxOptions o;
  o.isolation_only = true;
  v1::ToolCall none;
  none.set_workspace(ws_);
  EXPECT_EQ(Sandbox(o).Run(none).outcome(), v1::TOOL_ERROR);
  auto bad_ws = Sandbox(o).Run(ExecCall("relative/ws", {"true"}));
  EXPECT_EQ(bad_ws.outcome(), v1::TOOL_ERROR);
  EXPECT_EQ(bad_ws.error().code(), "INVALID_ARGUMENT");
  EXPECT_EQ(Sandbox(o).Run(ExecCall(ws_, {})).outcome(), v1::TOOL_ERROR);
  EXPECT_EQ(Sandbox(o).Run(ExecCall(ws_, {std::string("a\0b", 3)})).outcome(), v1::TOOL_ERROR);
  EXPECT_EQ(Sandbox(o).Run(ExecCall(ws_, {"no-such-program"})).outcome(), v1::TOOL_DENIED);
  v1::ToolCall env = ExecCall(ws_, {"true"});
  (*env.mutable_exec()->mutable_env())["LD_PRELOAD"] = "/workspace/x.so";
  EXPECT_EQ(Sandbox(o).Run(env).outcome(), v1::TOOL_DENIED);
  v1::ToolCall cwd = ExecCall(ws_, {"true"});
  cwd.mutable_exec()->set_cwd("../..");
  EXPECT_EQ(Sandbox(o).Run(cwd).outcome(), v1::TOOL_DENIED);
  // The service (no isolation_only) denies exec without a matching rule set.
  auto d = Sandbox(SandboxOptions{}).Run(ExecCall(ws_, {"true"}));
  EXPECT_EQ(d.outcome(), v1::TOOL_DENIED);
  EXPECT_TRUE(absl::StartsWith(d.denial_reason(), "rule:default-deny:")) << d.denial_reason();
}

TEST_F(SandboxToolsTest, ReadFileWithLineRanges) {
  v1::ToolCall c;
  c.mutable_read_file()->set_path("lines.txt");
  EXPECT_EQ(Run(c).stdout(), "one\ntwo\nthree\nfour\n");
  c.mutable_read_file()->set_first_line(2);
  c.mutable_read_file()->set_last_line(3);
  EXPECT_EQ(Run(c).stdout(), "two\nthree\n");
  c.mutable_read_file()->set_last_line(0);
  EXPECT_EQ(Run(c).stdout(), "two\nthree\nfour\n");
  c.mutable_read_file()->set_first_line(0);
  c.mutable_read_file()->set_last_line(1);
  EXPECT_EQ(Run(c).stdout(), "one\n");
  c.mutable_read_file()->set_first_line(3);
  EXPECT_EQ(Run(c).outcome(), v1::TOOL_ERROR);
  // A read grant narrows what is readable.
  v1::ToolCall g;
  g.mutable_grant()->add_read_paths("docs/**");
  g.mutable_read_file()->set_path("lines.txt");
  EXPECT_EQ(Run(g).outcome(), v1::TOOL_DENIED);
  g.mutable_read_file()->set_path("docs/readme.md");
  EXPECT_EQ(Run(g).stdout(), "hello\n");
}

TEST_F(SandboxToolsTest, ListDirGlobGrep) {
  v1::ToolCall l;
  l.mutable_list_dir()->set_path("");
  EXPECT_EQ(Run(l).stdout(), "docs/\nlines.txt\nsrc/\n");
  v1::ToolCall g;
  g.mutable_glob()->set_pattern("**/*.c");
  EXPECT_EQ(Run(g).stdout(), "src/a.c\n");
  g.mutable_glob()->set_pattern("*.h");
  g.mutable_glob()->set_base("src");
  EXPECT_EQ(Run(g).stdout(), "src/b.h\n");
  v1::ToolCall r;
  r.mutable_grep()->set_pattern("todo");
  r.mutable_grep()->set_path("src");
  r.mutable_grep()->set_ignore_case(true);
  auto out = Run(r);
  EXPECT_EQ(out.outcome(), v1::TOOL_RAN);
  EXPECT_TRUE(absl::StrContains(out.stdout(), "src/a.c:2:// TODO fix")) << out.stdout();
  EXPECT_TRUE(absl::StrContains(out.stdout(), "src/b.h:1:")) << out.stdout();
  r.mutable_grep()->set_max_matches(1);
  auto one = Run(r);
  EXPECT_EQ(std::count(one.stdout().begin(), one.stdout().end(), '\n'), 1);
  r.mutable_grep()->set_pattern("nomatchanywhere");
  EXPECT_EQ(Run(r).exit_code(), 1);
}

TEST_F(SandboxToolsTest, WriteFileAndEditOnlyWhereGranted) {
  v1::ToolCall w;
  w.mutable_write_file()->set_path("src/new.c");
  w.mutable_write_file()->set_content("new\n");
  auto denied = Run(w);
  EXPECT_EQ(denied.outcome(), v1::TOOL_DENIED);
  EXPECT_TRUE(absl::StartsWith(denied.denial_reason(), "rule:grant:"));
  EXPECT_FALSE(testing::HostPathExists(ws_ + "/src/new.c"));
  w.mutable_grant()->add_write_paths("src/**");
  auto ok = Run(w);
  EXPECT_EQ(ok.outcome(), v1::TOOL_RAN) << ok.stderr();
  EXPECT_EQ(ok.exit_code(), 0) << ok.stderr();
  EXPECT_EQ(ReadHostFile(ws_ + "/src/new.c"), "new\n");
  w.mutable_write_file()->set_path("src/a.c");
  w.mutable_write_file()->set_content("replaced\n");
  EXPECT_EQ(Run(w).exit_code(), 0);
  EXPECT_EQ(ReadHostFile(ws_ + "/src/a.c"), "replaced\n");
  w.mutable_write_file()->set_path("lines.txt");
  EXPECT_EQ(Run(w).outcome(), v1::TOOL_DENIED);

  v1::ToolCall e;
  e.mutable_grant()->add_write_paths("lines.txt");
  e.mutable_edit()->set_path("lines.txt");
  e.mutable_edit()->set_old_text("two");
  e.mutable_edit()->set_new_text("TWO");
  auto edited = Run(e);
  EXPECT_EQ(edited.outcome(), v1::TOOL_RAN);
  EXPECT_EQ(edited.exit_code(), 0) << edited.stderr();
  EXPECT_EQ(ReadHostFile(ws_ + "/lines.txt"), "one\nTWO\nthree\nfour\n");
  e.mutable_edit()->set_old_text("absent");
  auto missing = Run(e);
  EXPECT_EQ(missing.exit_code(), 1);
  EXPECT_TRUE(absl::StrContains(missing.stderr(), "not found"));
  e.mutable_edit()->set_old_text("o");
  EXPECT_EQ(Run(e).exit_code(), 1);  // not unique
  e.mutable_edit()->set_replace_all(true);
  e.mutable_edit()->set_new_text("0");
  EXPECT_EQ(Run(e).exit_code(), 0);
  EXPECT_EQ(ReadHostFile(ws_ + "/lines.txt"), "0ne\nTWO\nthree\nf0ur\n");
}

}  // namespace
}  // namespace gantry::sandbox
