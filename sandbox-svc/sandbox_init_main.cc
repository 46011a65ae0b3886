// gantry-sandbox-init: the first program in every sandbox, between bwrap and the
// command (docs/sandbox.md, "Isolation layers"). A static binary, so that it needs
// nothing of the sandbox's /usr; the service hands it to bwrap from memory
// (--ro-bind-data), so it is always the one built with the service. It
//   1. plans the workspace reads the call's operand globs allow (read_scope.h),
//   2. builds a Landlock ruleset: the program trees readable and executable, /etc
//      readable, /dev read-write without creating anything, /tmp and the writable
//      grants fully, the workspace as planned (and executable only when the call runs
//      programs from it),
//   3. sets the resource limits (inside, so that RLIMIT_NPROC counts the sandbox's own
//      processes, not the host user's),
//   4. restricts itself to the ruleset and execs the command; every process of the
//      command inherits the domain and can only narrow it.
// Exit status 125 with "gantry-sandbox-init: ..." on stderr when the set-up fails
// (nothing of the command ran); 126/127 when the command cannot be executed / found.
//
// Usage (built by the service: isolation.cc, InitArgv):
//   gantry-sandbox-init --cpu=N --as=N --nproc=N --fsize=N --nofile=N --core=N
//       [--exec-tree DIR]... [--read-tree DIR]... [--device-tree DIR]...
//       [--write-tree DIR]... [--workspace DIR [--workspace-exec]
//       [--read-one-of N GLOB...]...] [--landlock=required|best-effort] -- ARGV...
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sandbox-svc/landlock.h"
#include "sandbox-svc/read_scope.h"

namespace gantry::sandbox {
namespace {

constexpr int kSetupFailed = 125;

[[noreturn]] void Fail(const std::string& why) {
  std::fprintf(stderr, "gantry-sandbox-init: %s\n", why.c_str());
  std::exit(kSetupFailed);
}

struct Options {
  std::vector<std::pair<int, rlim_t>> limits;
  std::vector<std::string> exec_trees, read_trees, device_trees, write_trees;
  std::string workspace;
  bool workspace_exec = false;
  ReadScope scope;
  bool landlock_required = true;
  std::vector<char*> argv;
};

bool ParseNumber(const char* text, rlim_t* out) {
  if (*text == '\0') return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text, &end, 10);
  if (errno != 0 || *end != '\0' || *text == '-') return false;
  *out = static_cast<rlim_t>(v);
  return true;
}

Options Parse(int argc, char** argv) {
  Options o;
  const struct {
    const char* flag;
    int resource;
  } kLimits[] = {{"--cpu=", RLIMIT_CPU},     {"--as=", RLIMIT_AS},
                 {"--nproc=", RLIMIT_NPROC}, {"--fsize=", RLIMIT_FSIZE},
                 {"--nofile=", RLIMIT_NOFILE}, {"--core=", RLIMIT_CORE}};
  int i = 1;
  auto value = [&](const char* flag) -> std::string {
    if (i + 1 >= argc) Fail(std::string(flag) + " needs a value");
    return argv[++i];
  };
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    bool limit = false;
    for (const auto& l : kLimits) {
      const size_t n = strlen(l.flag);
      if (a.compare(0, n, l.flag) == 0) {
        rlim_t v;
        if (!ParseNumber(argv[i] + n, &v)) Fail("bad value in " + a);
        o.limits.emplace_back(l.resource, v);
        limit = true;
      }
    }
    if (limit) continue;
    if (a == "--exec-tree") {
      o.exec_trees.push_back(value("--exec-tree"));
    } else if (a == "--read-tree") {
      o.read_trees.push_back(value("--read-tree"));
    } else if (a == "--device-tree") {
      o.device_trees.push_back(value("--device-tree"));
    } else if (a == "--write-tree") {
      o.write_trees.push_back(value("--write-tree"));
    } else if (a == "--workspace") {
      o.workspace = value("--workspace");
    } else if (a == "--workspace-exec") {
      o.workspace_exec = true;
    } else if (a == "--read-one-of") {
      rlim_t n;
      if (!ParseNumber(value("--read-one-of").c_str(), &n) || n == 0 || n > 4096) {
        Fail("--read-one-of needs a count from 1 to 4096");
      }
      std::vector<std::string> globs;
      for (rlim_t k = 0; k < n; ++k) globs.push_back(value("--read-one-of"));
      o.scope.all_of.push_back(std::move(globs));
    } else if (a == "--landlock=required") {
      o.landlock_required = true;
    } else if (a == "--landlock=best-effort") {
      o.landlock_required = false;
    } else {
      Fail("unknown option " + a);
    }
  }
  if (i >= argc) Fail("no command after --");
  if (!o.scope.unconstrained() && o.workspace.empty()) Fail("--read-one-of needs --workspace");
  for (; i < argc; ++i) o.argv.push_back(argv[i]);
  o.argv.push_back(nullptr);
  return o;
}

// Adds a rule for `path` (a system tree: absent is fine, nothing is granted there).
void AllowTree(LandlockRuleset& ruleset, const std::string& path, uint64_t rights,
               bool must_exist) {
  int fd = open(path.c_str(), O_PATH | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT && !must_exist) return;
    Fail("cannot open " + path + ": " + strerror(errno));
  }
  std::string error;
  if (!ruleset.Allow(fd, rights, &error)) Fail(path + ": " + error);
  close(fd);
}

void Confine(const Options& o) {
  using namespace landlock;
  LandlockRuleset ruleset;
  std::string error;
  if (!ruleset.Create(&error)) {
    if (!o.landlock_required) return;
    Fail("the call's operand globs confine its reads, and " + error);
  }
  for (const auto& t : o.exec_trees) AllowTree(ruleset, t, kRead | kExecute, false);
  for (const auto& t : o.read_trees) AllowTree(ruleset, t, kRead, false);
  for (const auto& t : o.device_trees) {
    AllowTree(ruleset, t, kRead | kWriteFile | kTruncate | kIoctlDev, false);
  }
  for (const auto& t : o.write_trees) AllowTree(ruleset, t, kAll, true);
  if (!o.workspace.empty()) {
    if (o.workspace_exec) AllowTree(ruleset, o.workspace, kExecute, true);
    ReadPlan plan = PlanReads(o.workspace, o.scope);
    if (!plan.error.empty()) Fail(plan.error);
    const int root = open(o.workspace.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0) Fail("cannot open " + o.workspace + ": " + strerror(errno));
    for (const auto& g : plan.grants) {
      const uint64_t rights = g.kind == ReadGrant::kTree   ? kRead
                              : g.kind == ReadGrant::kFile ? kReadFile
                                                           : kReadDir;
      // Opened as the walk opened it, through no link.
      int fd = OpenBeneath(root, g.path, O_PATH);
      if (fd < 0) continue;  // gone since the walk: nothing granted
      // Still of the kind the walk saw: a file swapped for a directory since would
      // otherwise grant every file beneath it (found in review).
      struct stat st;
      const bool known = fstat(fd, &st) == 0;
      const bool is_dir = known && S_ISDIR(st.st_mode);
      const bool is_file = known && S_ISREG(st.st_mode);
      if ((g.kind == ReadGrant::kFile && !is_file) || (g.kind != ReadGrant::kFile && !is_dir)) {
        close(fd);
        continue;
      }
      if (!ruleset.Allow(fd, rights, &error)) Fail(g.path + ": " + error);
      close(fd);
    }
    close(root);
  }
  if (!ruleset.RestrictSelf(&error)) Fail(error);
}

[[noreturn]] void Exec(char** argv) {
  const std::string name = argv[0];
  if (name.find('/') != std::string::npos) {
    execv(argv[0], argv);
  } else {
    // As execvp, over the sandbox's PATH (bwrap set it; the command's own env may not).
    const char* path = getenv("PATH");
    std::string dirs = path && *path ? path : "/usr/bin:/bin";
    int last = ENOENT;
    for (size_t start = 0; start <= dirs.size();) {
      size_t end = dirs.find(':', start);
      if (end == std::string::npos) end = dirs.size();
      std::string candidate = dirs.substr(start, end - start);
      candidate = (candidate.empty() ? "." : candidate) + "/" + name;
      execv(candidate.c_str(), argv);
      if (errno != ENOENT && errno != ENOTDIR) last = errno;
      start = end + 1;
    }
    errno = last;
  }
  const int err = errno;
  std::fprintf(stderr, "gantry-sandbox-init: cannot execute %s: %s\n", argv[0], strerror(err));
  std::exit(err == ENOENT || err == ENOTDIR ? 127 : 126);
}

}  // namespace
}  // namespace gantry::sandbox

int main(int argc, char** argv) {
  using namespace gantry::sandbox;
  Options o = Parse(argc, argv);
  Confine(o);
  // After the rules: RLIMIT_NOFILE may be lower than the descriptors the walk used.
  for (const auto& [resource, value] : o.limits) {
    const rlimit r = {value, value};
    if (setrlimit(resource, &r) != 0) {
      Fail(std::string("setrlimit: ") + strerror(errno));
    }
  }
  Exec(o.argv.data());
}
