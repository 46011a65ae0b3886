#include "sandbox-svc/isolation.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/clock.h"
#include "common/error_codes.h"
#include "common/status.h"
#include "sandbox-svc/init_image.h"
#include "sandbox-svc/seccomp_filter.h"

namespace gantry::sandbox {
namespace {

constexpr int kChildSeccompFd = 3;
constexpr int kChildStatusFd = 4;
constexpr int kChildInitFd = 5;  // the init's bytes, for bwrap --ro-bind-data
constexpr size_t kMaxWritable = 32;

// Closes a descriptor once, on scope exit.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { Reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void Reset(int fd = -1) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

std::string JoinPath(const std::string& a, const std::string& b) {
  if (b.empty()) return a;
  return absl::StrCat(a, "/", b);
}

// Everything the child needs, prepared before fork (the child may only make
// async-signal-safe calls: the parent is multi-threaded).
struct ChildPlan {
  std::vector<char*> argv;
  std::vector<char*> envp;
  int stdin_fd, stdout_fd, stderr_fd, seccomp_fd, status_fd, init_fd;
  PrivilegeDrop drop;
  int netns_fd;  // a fresh network namespace to join, or -1
  const char* workspace;
  std::vector<const char*> writable;  // relative to the workspace, already checked
  std::string tmp_options;    // tmpfs options of the sandbox /tmp
  const char* bwrap;
  pid_t parent;
  const std::string* notify_program;  // the exec supervisor's filter
  int notify_sock;                    // where the listener goes
  // The program view to assemble at kStageUsr (root mode with only_programs), in order.
  struct ViewStep {
    enum Kind { kDir, kLink, kFile, kTree } kind;
    const char* stage;   // the path under kStageUsr
    const char* source;  // kFile, kTree: the host path; kLink: the link's target
  };
  bool build_view = false;
  std::vector<ViewStep> view;
  // Whether the workspace may hold programs (WorkspaceRunsPrograms); else noexec.
  bool workspace_exec = true;
};

[[noreturn]] void ChildFail(const char* what) {
  // Reported on stderr, which is the capture pipe; the parent sees no child-pid.
  ssize_t ignored = write(2, "gantry-sandbox: setup failed: ", 30);
  ignored = write(2, what, strlen(what));
  ignored = write(2, "\n", 1);
  (void)ignored;
  _exit(127);
}

int MoveHigh(int fd) { return fcntl(fd, F_DUPFD, 64); }

// `prefix` followed by the decimal digits of `v` (>= 0), without allocating.
void Digits(const char* prefix, int v, char* out) {
  size_t len = strlen(prefix);
  memcpy(out, prefix, len);
  char digits[16];
  int n = 0;
  for (; v > 0 || n == 0; v /= 10) digits[n++] = static_cast<char>('0' + v % 10);
  while (n > 0) out[len++] = digits[--n];
  out[len] = '\0';
}

// Binds each writable grant at its stage path (kStageWritable + index) from a
// descriptor opened beneath `ws` without following any symlink or magic link: a path
// swapped for a link after the service's check fails the call here, and mount(2)
// follows the descriptor, not a path that could be swapped again.
void BindWritable(const ChildPlan& p, int ws) {
  for (size_t i = 0; i < p.writable.size(); ++i) {
    int fd;
    if (p.writable[i][0] == '\0') {
      fd = fcntl(ws, F_DUPFD_CLOEXEC, 0);
    } else {
      open_how how;
      memset(&how, 0, sizeof(how));
      how.flags = O_PATH | O_CLOEXEC;
      how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
      fd = static_cast<int>(syscall(SYS_openat2, ws, p.writable[i], &how, sizeof(how)));
    }
    if (fd < 0) ChildFail("a writable path changed after its check");
    struct stat st;
    char stage[64], source[64];
    Digits(kStageWritable, static_cast<int>(i), stage);
    Digits("/proc/self/fd/", fd, source);
    if (fstat(fd, &st) != 0) ChildFail("stat writable path");
    if (S_ISDIR(st.st_mode)) {
      if (mkdir(stage, 0755) != 0) ChildFail("mkdir");
    } else if (S_ISREG(st.st_mode)) {
      int f = open(stage, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
      if (f < 0) ChildFail("stage file");
      close(f);
    } else {
      ChildFail("a writable path is neither a directory nor a file");
    }
    if (mount(source, stage, nullptr, MS_BIND, nullptr) != 0) ChildFail("bind writable path");
    // noexec: nothing written in a grant can be mapped executable (an exec from there is
    // refused by the supervisor anyway). Set here, outside bwrap's user namespace, the
    // flag is locked: nothing in the sandbox can clear it.
    if (mount(nullptr, stage, nullptr, MS_BIND | MS_REMOUNT | MS_NOEXEC | MS_NOSUID | MS_NODEV,
              nullptr) != 0) {
      ChildFail("remount writable path noexec");
    }
    close(fd);
  }
}

// Assembles the program view at kStageUsr: a tmpfs (noexec) holding its directories and
// links, each file and tree bound from the host and made read-only, nosuid and nodev,
// then the tmpfs itself read-only. Set here, outside bwrap's user namespace, those
// flags are locked: nothing in the sandbox can clear them.
void BuildView(const ChildPlan& p) {
  constexpr unsigned long kLocked = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV;
  if (mkdir(kStageUsr, 0755) != 0) ChildFail("mkdir view");
  if (mount("gantry-usr", kStageUsr, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
            "size=1m,mode=0755") != 0) {
    ChildFail("view tmpfs");
  }
  for (const ChildPlan::ViewStep& step : p.view) {
    switch (step.kind) {
      case ChildPlan::ViewStep::kDir:
        if (mkdir(step.stage, 0755) != 0) ChildFail("view directory");
        break;
      case ChildPlan::ViewStep::kLink:
        if (symlink(step.source, step.stage) != 0) ChildFail("view link");
        break;
      case ChildPlan::ViewStep::kFile:
      case ChildPlan::ViewStep::kTree: {
        const bool tree = step.kind == ChildPlan::ViewStep::kTree;
        if (!tree) {
          int f = open(step.stage, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
          if (f < 0) ChildFail("view file");
          close(f);
        }
        if (mount(step.source, step.stage, nullptr, MS_BIND | (tree ? MS_REC : 0), nullptr) != 0) {
          ChildFail("bind into the program view");
        }
        if (mount(nullptr, step.stage, nullptr, kLocked, nullptr) != 0) {
          ChildFail("remount the program view read-only");
        }
        break;
      }
    }
  }
  if (mount(nullptr, kStageUsr, nullptr, kLocked | MS_NOEXEC, nullptr) != 0) {
    ChildFail("program view read-only");
  }
}

[[noreturn]] void RunChild(const ChildPlan& p) {
  setpgid(0, 0);
  int in = MoveHigh(p.stdin_fd), out = MoveHigh(p.stdout_fd), err = MoveHigh(p.stderr_fd);
  int sec = MoveHigh(p.seccomp_fd), st = MoveHigh(p.status_fd), init = MoveHigh(p.init_fd);
  int notify = MoveHigh(p.notify_sock);
  // The namespace descriptor too: it may be 0-4, which the dup2s below overwrite.
  int netns = p.netns_fd >= 0 ? MoveHigh(p.netns_fd) : -1;
  if (in < 0 || out < 0 || err < 0 || sec < 0 || st < 0 || init < 0 || notify < 0 ||
      (p.netns_fd >= 0 && netns < 0)) {
    ChildFail("dup");
  }
  if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0 ||
      dup2(sec, kChildSeccompFd) < 0 || dup2(st, kChildStatusFd) < 0 ||
      dup2(init, kChildInitFd) < 0) {
    ChildFail("dup2");
  }
  if (p.drop.as_root) {
    if (unshare(CLONE_NEWNS) != 0) ChildFail("unshare(CLONE_NEWNS)");
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) ChildFail("private /");
    // Opened in the new namespace (a descriptor from the old one cannot be bound) and
    // before the stage tmpfs may cover it.
    int ws = open(p.workspace, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (ws < 0) ChildFail("open workspace");
    char ws_proc[64];
    Digits("/proc/self/fd/", ws, ws_proc);
    if (mount("gantry-stage", kStageRoot, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "size=64k,mode=0755") != 0) {
      ChildFail("stage tmpfs");
    }
    if (mkdir(kStageWorkspace, 0755) != 0 || mkdir(kStageTmp, 0755) != 0) ChildFail("mkdir");
    if (mount("gantry-tmp", kStageTmp, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              p.tmp_options.c_str()) != 0) {
      ChildFail("tmp tmpfs");
    }
    if (mount(ws_proc, kStageWorkspace, nullptr, MS_BIND | MS_REC, nullptr) != 0) {
      ChildFail("bind workspace");
    }
    // noexec unless a workspace program is granted: then no file there can be mapped
    // executable, not even by the loader (ld.so /workspace/copy-of-id). Locked, as for
    // the writable paths below.
    if (!p.workspace_exec &&
        mount(nullptr, kStageWorkspace, nullptr,
              MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOEXEC | MS_NOSUID | MS_NODEV, nullptr) != 0) {
      ChildFail("remount workspace noexec");
    }
    BindWritable(p, ws);
    if (p.build_view) BuildView(p);
    if (netns >= 0 && setns(netns, CLONE_NEWNET) != 0) ChildFail("setns(net)");
    gid_t gid = p.drop.gid;
    if (setgroups(1, &gid) != 0 || setresgid(gid, gid, gid) != 0 ||
        setresuid(p.drop.uid, p.drop.uid, p.drop.uid) != 0) {
      ChildFail("drop privileges");
    }
  }
  // After the credential change (which clears it): die with the service.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != p.parent) _exit(127);
  // From here on every exec of this process and its descendants waits for the service.
  if (p.notify_program != nullptr) {
    int listener = InstallExecNotifyFilter(*p.notify_program);
    if (listener < 0) ChildFail("seccomp exec notify filter");
    if (!SendFd(notify, listener)) ChildFail("hand over the exec listener");
    close(listener);
  }
  close(notify);
  syscall(SYS_close_range, static_cast<unsigned>(kChildInitFd) + 1, ~0u, 0u);
  execve(p.bwrap, p.argv.data(), p.envp.data());
  ChildFail("exec bwrap");
}

uint64_t Micros(const timeval& tv) {
  return static_cast<uint64_t>(tv.tv_sec) * 1000000u + static_cast<uint64_t>(tv.tv_usec);
}

// Reads what is available from `fd` into `out` up to `cap`; returns false at EOF or
// when the cap was hit (then the caller closes the pipe).
bool Drain(int fd, uint64_t cap, std::string* out, bool* truncated) {
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0) return errno == EAGAIN || errno == EINTR;
    if (n == 0) return false;
    uint64_t room = cap > out->size() ? cap - out->size() : 0;
    if (static_cast<uint64_t>(n) > room) {
      out->append(buf, static_cast<size_t>(room));
      *truncated = true;
      return false;
    }
    out->append(buf, static_cast<size_t>(n));
  }
}

// The "child-pid" bwrap reports on --json-status-fd, or 0.
pid_t ChildPidFromStatus(const std::string& json) {
  size_t at = json.find("\"child-pid\"");
  if (at == std::string::npos) return 0;
  at = json.find(':', at);
  if (at == std::string::npos) return 0;
  ++at;
  while (at < json.size() && json[at] == ' ') ++at;
  long pid = 0;
  size_t digits = 0;
  for (; at < json.size() && json[at] >= '0' && json[at] <= '9' && digits < 10; ++at, ++digits) {
    pid = pid * 10 + (json[at] - '0');
  }
  // Only a complete number (followed by something) counts.
  if (digits == 0 || at >= json.size()) return 0;
  return static_cast<pid_t>(pid);
}

// Fresh network namespaces, made ahead of time by one background thread so that a
// call does not wait for one (about as long as the rest of bwrap's set-up on a busy
// machine). Each holds only a loopback interface, brought up; each is used by exactly
// one call and dies with it. Root only (creating one needs CAP_SYS_ADMIN).
class NetnsPool {
 public:
  static NetnsPool& Get() {
    static NetnsPool* pool = new NetnsPool;  // lives for the process, like its thread
    return *pool;
  }
  // A namespace descriptor the caller owns, or -1 when none is ready.
  int Take() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!started_) {
      started_ = true;
      std::thread([this] { Fill(); }).detach();
    }
    if (ready_.empty()) return -1;
    int fd = ready_.front();
    ready_.pop_front();
    cv_.notify_one();
    return fd;
  }

 private:
  static constexpr size_t kTarget = 4;
  void Fill() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return ready_.size() < kTarget; });
      }
      // unshare(CLONE_NEWNET) moves only this thread, which does nothing else.
      if (unshare(CLONE_NEWNET) != 0) return;  // not permitted: calls fall back to bwrap's
      int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      if (s >= 0) {
        ifreq ifr;
        memset(&ifr, 0, sizeof(ifr));
        strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
        if (ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
          ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
          ioctl(s, SIOCSIFFLAGS, &ifr);
        }
        close(s);
      }
      int fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
      if (fd < 0) return;
      std::lock_guard<std::mutex> lock(mu_);
      ready_.push_back(fd);
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<int> ready_;
  bool started_ = false;
};

// A fresh read-only descriptor (offset 0) of the init's bytes: one sealed memfd per
// process, reopened for each call (bwrap reads it to its end).
absl::StatusOr<int> OpenInitImage() {
  static const int image = [] {
    int fd = memfd_create("gantry-sandbox-init", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return -1;
    const std::string_view bytes = SandboxInitImage();
    for (size_t off = 0; off < bytes.size();) {
      ssize_t n = write(fd, bytes.data() + off, bytes.size() - off);
      if (n <= 0) {
        close(fd);
        return -1;
      }
      off += static_cast<size_t>(n);
    }
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
      close(fd);
      return -1;
    }
    return fd;
  }();
  if (image < 0) return ReasonError("internal", "cannot hold the sandbox init in a memfd");
  char path[64];
  Digits("/proc/self/fd/", image, path);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ReasonError("internal", absl::StrCat("reopen the sandbox init: ", strerror(errno)));
  return fd;
}

}  // namespace

std::string BwrapPath() {
  const char* env = std::getenv("GANTRY_BWRAP");
  return env && *env ? env : "/usr/bin/bwrap";
}

const SystemLayout& HostSystemLayout() {
  static const SystemLayout* layout = [] {
    auto* l = new SystemLayout;
    for (const char* name : {"bin", "sbin", "lib", "lib32", "lib64", "libx32"}) {
      std::string path = absl::StrCat("/", name);
      struct stat st;
      if (lstat(path.c_str(), &st) != 0) continue;
      if (S_ISLNK(st.st_mode)) {
        char target[4096];
        ssize_t n = readlink(path.c_str(), target, sizeof(target) - 1);
        if (n > 0) l->links.emplace_back(path, std::string(target, static_cast<size_t>(n)));
      } else if (S_ISDIR(st.st_mode)) {
        l->dirs.push_back(path);
      }
    }
    // Only what programs need to load and run: the loader's cache, Debian's
    // alternatives links (awk, editor, ...), the time zone. Each bind costs bwrap a
    // remount, so the list stays short.
    for (const char* name : {"/etc/ld.so.cache", "/etc/alternatives", "/etc/localtime"}) {
      if (access(name, F_OK) == 0) l->etc.push_back(name);
    }
    return l;
  }();
  return *layout;
}

std::vector<std::string> BuildBwrapArgv(const IsolationSpec& spec, const SystemLayout& layout,
                                        const ProgramView& view, bool staged, bool own_netns,
                                        int seccomp_fd, int status_fd, int init_fd) {
  std::vector<std::string> a = {"bwrap", "--unshare-user", "--unshare-pid"};
  if (!own_netns) a.push_back("--unshare-net");
  a.insert(a.end(), {"--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--disable-userns", "--uid", "1000", "--gid",
      "1000", "--hostname", "sandbox", "--die-with-parent", "--new-session", "--cap-drop",
      "ALL"});
  if (!spec.only_programs) {
    a.insert(a.end(), {"--ro-bind", "/usr", "/usr"});
  } else if (staged) {
    a.insert(a.end(), {"--ro-bind", kStageUsr, "/usr"});  // assembled by the set-up
  } else {
    AppendProgramView(view, &a);
  }
  for (const auto& [path, target] : layout.links) {
    a.insert(a.end(), {"--symlink", target, path});
  }
  for (const auto& dir : layout.dirs) a.insert(a.end(), {"--ro-bind", dir, dir});
  for (const auto& file : layout.etc) {
    // With a program view, only the alternatives links its programs go through.
    if (spec.only_programs && file == "/etc/alternatives") continue;
    a.insert(a.end(), {"--ro-bind", file, file});
  }
  if (spec.only_programs) {
    for (const auto& [path, target] : view.etc_links) a.insert(a.end(), {"--symlink", target, path});
  }
  // No /proc: without it no process can write another's /proc/PID/mem (the exec
  // supervisor's arguments) or reach /proc/PID/root, /proc/self/fd magic links.
  // /dev read-only: bwrap's /dev is a tmpfs without noexec or a size, so a file written
  // there (/dev/shm/x) could be mapped executable and fill memory (found by a red team).
  // Device nodes stay writable (/dev/null); POSIX shared memory (/dev/shm) is not there.
  a.insert(a.end(), {"--dev", "/dev", "--remount-ro", "/dev"});
  // The init, from the service's memory: read-only, like everything but the grants.
  a.insert(a.end(), {"--perms", "0555", "--ro-bind-data", std::to_string(init_fd), kSandboxInit});
  if (staged) {
    a.insert(a.end(), {"--bind", kStageTmp, "/tmp"});
  } else {
    a.insert(a.end(), {"--size", std::to_string(spec.limits.tmp_bytes), "--tmpfs", "/tmp"});
  }
  const std::string ws_source = staged ? kStageWorkspace : spec.workspace;
  a.insert(a.end(), {"--ro-bind", ws_source, kSandboxWorkspace});
  for (size_t i = 0; i < spec.writable.size(); ++i) {
    a.insert(a.end(), {"--bind",
                       staged ? absl::StrCat(kStageWritable, i) : JoinPath(ws_source, spec.writable[i]),
                       JoinPath(kSandboxWorkspace, spec.writable[i])});
  }
  a.insert(a.end(), {"--remount-ro", "/", "--chdir", JoinPath(kSandboxWorkspace, spec.cwd),
                     "--clearenv", "--setenv", "PATH", kSandboxPath, "--setenv", "HOME", "/tmp",
                     "--setenv", "LANG", "C.UTF-8",
                     // git uses a bare repository only when told to (--git-dir): one
                     // committed into the workspace cannot run its hooks or
                     // core.fsmonitor just because a command starts inside it.
                     "--setenv", "GIT_CONFIG_COUNT", "1", "--setenv", "GIT_CONFIG_KEY_0",
                     "safe.bareRepository", "--setenv", "GIT_CONFIG_VALUE_0", "explicit"});
  for (const auto& [k, v] : spec.env) a.insert(a.end(), {"--setenv", k, v});
  a.insert(a.end(), {"--seccomp", std::to_string(seccomp_fd), "--json-status-fd",
                     std::to_string(status_fd), "--"});
  std::vector<std::string> command = InitArgv(spec, layout);
  a.insert(a.end(), command.begin(), command.end());
  return a;
}

void AppendProgramView(const ProgramView& view, std::vector<std::string>* a) {
  a->insert(a->end(), {"--tmpfs", "/usr"});
  for (const auto& dir : view.dirs) a->insert(a->end(), {"--dir", dir});
  for (const auto& [path, target] : view.links) a->insert(a->end(), {"--symlink", target, path});
  for (const auto& file : view.files) a->insert(a->end(), {"--ro-bind", file, file});
  for (const auto& tree : view.trees) a->insert(a->end(), {"--ro-bind", tree, tree});
  a->insert(a->end(), {"--remount-ro", "/usr"});
}

std::vector<std::string> InitArgv(const IsolationSpec& spec, const SystemLayout& layout) {
  std::vector<std::string> a = {kSandboxInit,
                                absl::StrCat("--cpu=", spec.limits.cpu_seconds),
                                absl::StrCat("--as=", spec.limits.address_space_bytes),
                                absl::StrCat("--nproc=", spec.limits.max_processes),
                                absl::StrCat("--fsize=", spec.limits.max_file_bytes),
                                absl::StrCat("--nofile=", spec.limits.max_open_files),
                                // No core files (a crash would write one into a grant).
                                "--core=0", "--exec-tree", "/usr"};
  for (const auto& dir : layout.dirs) a.insert(a.end(), {"--exec-tree", dir});
  a.insert(a.end(), {"--read-tree", "/etc", "--device-tree", "/dev", "--write-tree", "/tmp"});
  for (const auto& rel : spec.writable) {
    a.insert(a.end(), {"--write-tree", JoinPath(kSandboxWorkspace, rel)});
  }
  a.insert(a.end(), {"--workspace", kSandboxWorkspace});
  if (WorkspaceRunsPrograms(spec)) a.push_back("--workspace-exec");
  for (const auto& any_of : spec.read_scope.all_of) {
    a.insert(a.end(), {"--read-one-of", std::to_string(any_of.size())});
    a.insert(a.end(), any_of.begin(), any_of.end());
  }
  // Confined reads need the kernel's Landlock; without globs it is defence in depth.
  a.push_back(spec.read_scope.unconstrained() ? "--landlock=best-effort" : "--landlock=required");
  a.push_back("--");
  a.insert(a.end(), spec.argv.begin(), spec.argv.end());
  return a;
}

bool WorkspaceRunsPrograms(const IsolationSpec& spec) {
  if (!spec.only_programs) return true;
  const std::string prefix = absl::StrCat(kSandboxWorkspace, "/");
  for (const auto& program : spec.programs) {
    if (!absl::StartsWith(program, prefix)) continue;
    // A regular file beneath the workspace, no link leading out of it: a path that
    // names nothing (absent, or a link to the loader) does not make the workspace exec.
    int fd = OpenWorkspaceFile(spec.workspace, program.substr(prefix.size()));
    if (fd >= 0) {
      close(fd);
      return true;
    }
  }
  return false;
}

PrivilegeDrop ChoosePrivilegeDrop(const std::string& workspace, uid_t fallback_uid,
                                  gid_t fallback_gid) {
  PrivilegeDrop drop;
  if (geteuid() != 0) return drop;
  drop.as_root = true;
  struct stat st;
  if (stat(workspace.c_str(), &st) == 0 && st.st_uid != 0) {
    drop.uid = st.st_uid;
    drop.gid = st.st_gid;
  } else {
    drop.uid = fallback_uid;
    drop.gid = fallback_gid;
  }
  return drop;
}

absl::StatusOr<RunOutcome> RunIsolated(const IsolationSpec& spec, const PrivilegeDrop& drop) {
  if (spec.argv.empty()) return ReasonError("invalid_tool_call", "empty argv");
  if (spec.writable.size() > kMaxWritable) {
    return ReasonError("invalid_tool_call", "more than 32 writable paths");
  }
  const int64_t start = SystemClock().MonotonicMicros();
  Fd ws(open(spec.workspace.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (ws.get() < 0) {
    return ReasonError("invalid_tool_call",
                       absl::StrCat("cannot open workspace: ", strerror(errno)));
  }
  GANTRY_ASSIGN_OR_RETURN(int sec_raw, SeccompProgramFd());
  Fd sec(sec_raw);
  GANTRY_ASSIGN_OR_RETURN(int init_raw, OpenInitImage());
  Fd init(init_raw);
  GANTRY_ASSIGN_OR_RETURN(std::string notify_program, ExecNotifyProgram());
  int socks[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, socks) != 0) {
    return ReasonError("internal", "socketpair failed");
  }
  Fd notify_r(socks[0]), notify_w(socks[1]);
  Fd in(memfd_create("gantry-stdin", MFD_CLOEXEC));
  if (in.get() < 0) return ReasonError("internal", "memfd_create failed");
  for (size_t off = 0; off < spec.stdin_data.size();) {
    ssize_t n = write(in.get(), spec.stdin_data.data() + off, spec.stdin_data.size() - off);
    if (n <= 0) return ReasonError("internal", "writing stdin failed");
    off += static_cast<size_t>(n);
  }
  lseek(in.get(), 0, SEEK_SET);
  int p_out[2], p_err[2], p_st[2];
  if (pipe2(p_out, O_CLOEXEC) != 0) return ReasonError("internal", "pipe failed");
  Fd out_r(p_out[0]), out_w(p_out[1]);
  if (pipe2(p_err, O_CLOEXEC) != 0) return ReasonError("internal", "pipe failed");
  Fd err_r(p_err[0]), err_w(p_err[1]);
  if (pipe2(p_st, O_CLOEXEC) != 0) return ReasonError("internal", "pipe failed");
  Fd st_r(p_st[0]), st_w(p_st[1]);

  Fd netns(drop.as_root ? NetnsPool::Get().Take() : -1);
  ProgramView view;
  if (spec.only_programs) {
    view = PlanProgramView(spec.programs, spec.workspace);
  }
  std::vector<std::string> args = BuildBwrapArgv(spec, HostSystemLayout(), view, drop.as_root,
                                                 netns.get() >= 0, kChildSeccompFd, kChildStatusFd,
                                                 kChildInitFd);
  const std::string bwrap = BwrapPath();
  ChildPlan plan;
  for (auto& s : args) plan.argv.push_back(s.data());
  plan.argv.push_back(nullptr);
  plan.envp.push_back(nullptr);
  plan.stdin_fd = in.get();
  plan.stdout_fd = out_w.get();
  plan.stderr_fd = err_w.get();
  plan.seccomp_fd = sec.get();
  plan.status_fd = st_w.get();
  plan.init_fd = init.get();
  plan.drop = drop;
  plan.netns_fd = netns.get();
  plan.workspace = spec.workspace.c_str();
  for (const auto& rel : spec.writable) plan.writable.push_back(rel.c_str());
  plan.tmp_options = absl::StrCat("size=", spec.limits.tmp_bytes, ",mode=1777");
  plan.bwrap = bwrap.c_str();
  plan.parent = getpid();
  plan.notify_program = spec.supervise_exec ? &notify_program : nullptr;
  plan.notify_sock = notify_w.get();
  // The view's paths under kStageUsr, kept alive until the fork.
  std::vector<std::string> view_paths;
  if (spec.only_programs && drop.as_root) {
    using Step = ChildPlan::ViewStep;
    auto stage = [](const std::string& host) { return absl::StrCat(kStageUsr, host.substr(4)); };
    view_paths.reserve(view.dirs.size() + view.links.size() + view.files.size() + view.trees.size());
    for (const auto& d : view.dirs) view_paths.push_back(stage(d));
    for (const auto& l : view.links) view_paths.push_back(stage(l.first));
    for (const auto& f : view.files) view_paths.push_back(stage(f));
    for (const auto& t : view.trees) view_paths.push_back(stage(t));
    size_t i = 0;
    for (size_t k = 0; k < view.dirs.size(); ++k) plan.view.push_back({Step::kDir, view_paths[i++].c_str(), nullptr});
    for (const auto& l : view.links) plan.view.push_back({Step::kLink, view_paths[i++].c_str(), l.second.c_str()});
    for (const auto& f : view.files) plan.view.push_back({Step::kFile, view_paths[i++].c_str(), f.c_str()});
    for (const auto& t : view.trees) plan.view.push_back({Step::kTree, view_paths[i++].c_str(), t.c_str()});
    plan.build_view = true;
  }
  plan.workspace_exec = WorkspaceRunsPrograms(spec);

  pid_t pid = fork();
  if (pid < 0) return ReasonError("internal", absl::StrCat("fork: ", strerror(errno)));
  if (pid == 0) RunChild(plan);
  out_w.Reset();
  init.Reset();
  err_w.Reset();
  st_w.Reset();
  notify_w.Reset();
  netns.Reset();
  // The child's set-up takes a few milliseconds; it sends the listener just before it
  // execs bwrap, and bwrap's exec waits for the supervisor. No listener: the child
  // failed and reports why on stderr.
  // The init's exec is bwrap's command, as BuildBwrapArgv wrote it (after "--").
  auto init_at = args.begin() + 1;  // args[0] is "bwrap"
  while (init_at != args.end() && !(*init_at == kSandboxInit && *(init_at - 1) == "--")) ++init_at;
  std::vector<TrustedExec> trusted = {{bwrap, args},
                                      {kSandboxInit, std::vector<std::string>(init_at, args.end())}};
  ExecSupervisor supervisor(spec.supervise_exec ? ReceiveFd(notify_r.get(), 10000) : -1,
                            std::move(trusted),
                            spec.decide_exec ? spec.decide_exec : [](const ExecRequest&) {
                              return ExecVerdict{true, "isolation_only", ""};
                            });
  notify_r.Reset();
  bool supervising = supervisor.fd() >= 0;
  Fd pidfd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
  for (int fd : {out_r.get(), err_r.get(), st_r.get()}) {
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  }

  RunOutcome outcome;
  // The sandbox's pid 1 (bwrap's init): when it exits, every process of the sandbox's
  // pid namespace is gone.
  Fd init_pidfd;
  std::string status_json;
  bool status_trunc = false;
  const Deadline deadline(SystemClock(), static_cast<int64_t>(spec.limits.wall_ms) * 1000);
  bool exited = false, killed = false;
  for (;;) {
    if (out_r.get() < 0 && err_r.get() < 0 && st_r.get() < 0 && (exited || killed)) break;
    if (exited) supervising = false;  // nothing can exec any more
    pollfd fds[5];
    int n = 0;
    int idx_out = -1, idx_err = -1, idx_st = -1, idx_pid = -1, idx_exec = -1;
    if (supervising) { idx_exec = n; fds[n++] = {supervisor.fd(), POLLIN, 0}; }
    if (out_r.get() >= 0) { idx_out = n; fds[n++] = {out_r.get(), POLLIN, 0}; }
    if (err_r.get() >= 0) { idx_err = n; fds[n++] = {err_r.get(), POLLIN, 0}; }
    if (st_r.get() >= 0) { idx_st = n; fds[n++] = {st_r.get(), POLLIN, 0}; }
    if (!exited && pidfd.get() >= 0) { idx_pid = n; fds[n++] = {pidfd.get(), POLLIN, 0}; }
    int64_t timeout_us = killed ? 1000000 : std::max<int64_t>(deadline.RemainingMicros(), 0);
    // An allowed exec waits, stopped after it, for its check (CheckPending): look every
    // 100 us meanwhile (a tracee's stop wakes no descriptor).
    const bool short_wait = supervisor.HasPending() && timeout_us > 100;
    if (short_wait) timeout_us = 100;
    if (n == 0) break;
    const timespec timeout = {static_cast<time_t>(timeout_us / 1000000),
                              static_cast<long>(timeout_us % 1000000) * 1000};
    int ready = ppoll(fds, static_cast<nfds_t>(n), &timeout, nullptr);
    if (ready < 0 && errno == EINTR) continue;
    if (supervisor.HasPending()) supervisor.CheckPending();
    if (ready == 0 && !(short_wait && !killed && !deadline.Expired())) {
      if (killed) break;  // clean-up took too long; give up on the pipes
      kill(pid, SIGKILL);
      killed = true;
      outcome.timed_out = true;
      continue;
    }
    if (ready == 0) continue;  // only the short wait for a pending exec check
    if (idx_exec >= 0 && fds[idx_exec].revents) {
      // POLLHUP: every process under the filter is gone.
      if ((fds[idx_exec].revents & POLLIN) == 0 || !supervisor.HandleOne()) supervising = false;
    }
    if (idx_out >= 0 && fds[idx_out].revents &&
        !Drain(out_r.get(), spec.limits.stdout_cap_bytes, &outcome.stdout_data,
               &outcome.stdout_truncated)) {
      out_r.Reset();
    }
    if (idx_err >= 0 && fds[idx_err].revents &&
        !Drain(err_r.get(), spec.limits.stderr_cap_bytes, &outcome.stderr_data,
               &outcome.stderr_truncated)) {
      err_r.Reset();
    }
    if (idx_st >= 0 && fds[idx_st].revents &&
        !Drain(st_r.get(), 4096, &status_json, &status_trunc)) {
      st_r.Reset();
    }
    if (init_pidfd.get() < 0) {
      pid_t init = ChildPidFromStatus(status_json);
      if (init > 0) init_pidfd.Reset(static_cast<int>(syscall(SYS_pidfd_open, init, 0)));
    }
    if (idx_pid >= 0 && fds[idx_pid].revents) {
      exited = true;
      // The pid namespace is gone with bwrap; the pipes reach EOF now. If a writer
      // somehow survived, stop waiting for it soon.
      if (!killed && deadline.Expired()) killed = true;
    }
    if (!exited && pidfd.get() < 0 && out_r.get() < 0 && err_r.get() < 0 && st_r.get() < 0) {
      exited = true;  // no pidfd: rely on wait4 below
    }
  }
  // Nothing may outlive the call: kill the namespace's init (a no-op when it is gone)
  // and wait until it and so every process of the namespace has exited.
  if (init_pidfd.get() < 0) {
    pid_t init = ChildPidFromStatus(status_json);
    if (init > 0) init_pidfd.Reset(static_cast<int>(syscall(SYS_pidfd_open, init, 0)));
  }
  if (init_pidfd.get() >= 0) {
    syscall(SYS_pidfd_send_signal, init_pidfd.get(), SIGKILL, nullptr, 0);
    pollfd pfd = {init_pidfd.get(), POLLIN, 0};
    while (poll(&pfd, 1, 5000) < 0 && errno == EINTR) {
    }
  }
  int status = 0;
  struct rusage ru;
  memset(&ru, 0, sizeof(ru));
  while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
  }
  outcome.wall_us = static_cast<uint64_t>(SystemClock().MonotonicMicros() - start);
  outcome.user_cpu_us = Micros(ru.ru_utime);
  outcome.system_cpu_us = Micros(ru.ru_stime);
  outcome.max_rss_bytes = static_cast<uint64_t>(ru.ru_maxrss) * 1024u;
  outcome.execs = supervisor.records();
  outcome.execs_decided = supervisor.decided();
  outcome.execs_denied = supervisor.denied();
  if (outcome.timed_out) {
    outcome.term_signal = SIGKILL;
    outcome.exit_code = 128 + SIGKILL;
    return outcome;
  }
  if (!absl::StrContains(status_json, "child-pid")) {
    // bwrap (or our set-up) failed before starting the command.
    std::string why = outcome.stderr_data.substr(0, 2000);
    return ReasonError("internal", absl::StrCat("sandbox set-up failed: ", why));
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  outcome.exit_code = code;
  if (code > 128 && code < 128 + 65) outcome.term_signal = code - 128;
  return outcome;
}

}  // namespace gantry::sandbox
