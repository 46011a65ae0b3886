#include "sandbox-svc/sandbox_test_support.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace gantry::sandbox::testing {
namespace {

void ChownTree(const std::string& path, uid_t uid) {
  if (lchown(path.c_str(), uid, uid) != 0) return;
  struct stat st;
  if (lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return;
  DIR* d = opendir(path.c_str());
  if (!d) return;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") ChownTree(absl::StrCat(path, "/", n), uid);
  }
  closedir(d);
}

}  // namespace

bool RequireRoot() {
  if (geteuid() == 0) return true;
  ADD_FAILURE() << "the sandbox tests must run as root (CI runs them as root on Debian 12): "
                   "as another user the uid drop, the noexec /tmp and RLIMIT_NPROC cannot be "
                   "exercised, and a silent pass would prove nothing";
  return false;
}

std::string MakeWorkspace(const std::string& name,
                          const std::vector<std::pair<std::string, std::string>>& files,
                          uid_t uid) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string dir = absl::StrCat(tmp ? tmp : "/tmp", "/", name);
  std::string cmd = absl::StrCat("rm -rf '", dir, "'");
  if (std::system(cmd.c_str()) != 0) ADD_FAILURE() << cmd;
  mkdir(dir.c_str(), 0755);
  for (const auto& [rel, content] : files) {
    std::string path = absl::StrCat(dir, "/", rel);
    std::string parent = path.substr(0, path.rfind('/'));
    std::string mk = absl::StrCat("mkdir -p '", parent, "'");
    if (std::system(mk.c_str()) != 0) ADD_FAILURE() << mk;
    std::ofstream(path) << content;
  }
  ChownTree(dir, uid);
  return dir;
}

v1::ToolCall ExecCall(const std::string& workspace, const std::vector<std::string>& argv) {
  v1::ToolCall call;
  call.set_call_id("call_test");
  call.set_task_id("task_test");
  call.set_workspace(workspace);
  for (const auto& a : argv) call.mutable_exec()->add_argv(a);
  return call;
}

absl::StatusOr<std::string> FakeResolver::Resolve(absl::string_view name,
                                                  absl::string_view cwd) const {
  std::string path;
  if (absl::StartsWith(name, "/")) {
    path = std::string(name);
  } else if (absl::StrContains(name, '/')) {
    absl::string_view rel = name;
    if (absl::StartsWith(rel, "./")) rel.remove_prefix(2);
    path = absl::StrCat(cwd, "/", rel);
  } else {
    path = absl::StrCat("/usr/bin/", name);
  }
  if (path == "/usr/bin/../bin/rm") path = "/usr/bin/rm";
  auto it = links.find(path);
  if (it != links.end()) path = it->second;
  if (absl::StrContains(path, "missing")) return absl::NotFoundError("missing");
  return path;
}

std::string PolicyGranting(const std::string& principal,
                           const std::vector<std::string>& executables, const std::string& extra) {
  std::string text = absl::StrCat(
      "version: 1\n"
      "defaults: {budgets: {tokens_per_day: 1, tokens_per_month: 1, requests_per_minute: 1,"
      " concurrent_requests: 1}}\n"
      "models: []\n"
      "principals:\n"
      "  users:\n"
      "    - {name: ", principal, ", key_sha256: ", std::string(63, '0'), "1, priority: batch}\n"
      "grants:\n"
      "  - user: ", principal, "\n"
      "    commands:\n");
  for (const auto& exe : executables) absl::StrAppend(&text, "      - {executable: ", exe, "}\n");
  return text + extra;
}

std::string ReadHostFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool HostPathExists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

int CountProcessesOf(uid_t uid) {
  int n = 0;
  DIR* d = opendir("/proc");
  if (!d) return -1;
  while (dirent* e = readdir(d)) {
    int pid;
    if (!absl::SimpleAtoi(e->d_name, &pid)) continue;
    struct stat st;
    if (stat(absl::StrCat("/proc/", pid).c_str(), &st) != 0 || st.st_uid != uid) continue;
    // A zombie has exited; it only waits for its (re)parent to reap it.
    const std::string stat_line = ReadHostFile(absl::StrCat("/proc/", pid, "/stat"));
    // Gone between the two reads: it exited (a killed fork bomb's last children).
    if (stat_line.empty()) continue;
    size_t paren = stat_line.rfind(')');
    if (paren != std::string::npos && stat_line.substr(paren + 2, 1) == "Z") continue;
    ++n;
    std::printf("live process of uid %u: %s", static_cast<unsigned>(uid), stat_line.c_str());
  }
  closedir(d);
  return n;
}

EscapeTally::~EscapeTally() {
  std::printf("ESCAPE %s: attempts=%d successes=%d\n", name_.c_str(), attempts_, successes_);
  std::fflush(stdout);
}

void EscapeTally::Attempt(bool escaped, const std::string& what) {
  ++attempts_;
  if (escaped) {
    ++successes_;
    ADD_FAILURE() << "escape succeeded: " << what;
  }
}

}  // namespace gantry::sandbox::testing
