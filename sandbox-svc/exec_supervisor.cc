#include "sandbox-svc/exec_supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/kcmp.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/clock.h"
#include "sandbox-svc/exec_format.h"

namespace gantry::sandbox {
namespace {

constexpr size_t kMaxPath = 4096;
constexpr size_t kMaxArgc = 4096;
constexpr size_t kMaxArgvBytes = 1u << 20;
constexpr size_t kClipArg = 200;
constexpr int kMaxLinks = 40;

class OwnedFd {
 public:
  explicit OwnedFd(int fd = -1) : fd_(fd) {}
  ~OwnedFd() {
    if (fd_ >= 0) close(fd_);
  }
  OwnedFd(OwnedFd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  OwnedFd& operator=(OwnedFd&& o) noexcept {
    if (this != &o) {
      if (fd_ >= 0) close(fd_);
      fd_ = o.fd_;
      o.fd_ = -1;
    }
    return *this;
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string ProcPath(pid_t pid, absl::string_view rest) {
  return absl::StrCat("/proc/", pid, "/", rest);
}

// A file on a read-only mount can still change through another name on a writable
// one: a hard link in a write grant (made by whoever wrote the workspace; a link across
// mounts cannot be made from inside). Its owner can always chmod it through that name,
// so its mode bits say nothing; only root's files that no one else may write are safe
// whatever their links (the system's own hard links, perl and perl5.36.0).
bool WritableElsewhere(const struct stat& st) {
  return st.st_nlink > 1 && (st.st_uid != 0 || (st.st_mode & 0022) != 0);
}

bool OnReadOnlyMount(int fd) {
  struct statvfs s;
  return fstatvfs(fd, &s) == 0 && (s.f_flag & ST_RDONLY) != 0;
}

// Reads `len` bytes at `addr` of process `pid`; false unless all were read.
bool ReadMemory(pid_t pid, uint64_t addr, void* out, size_t len) {
  iovec local = {out, len};
  iovec remote = {reinterpret_cast<void*>(addr), len};
  return process_vm_readv(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(len);
}

// A NUL-terminated string at `addr`, at most `max` bytes; read a page at a time so that
// a string ending just before an unmapped page is read whole.
bool ReadString(pid_t pid, uint64_t addr, size_t max, std::string* out) {
  out->clear();
  char buf[4096];
  while (out->size() <= max) {
    size_t chunk = 4096 - static_cast<size_t>(addr % 4096);
    if (!ReadMemory(pid, addr, buf, chunk)) return false;
    const void* nul = memchr(buf, 0, chunk);
    if (nul != nullptr) {
      out->append(buf, static_cast<const char*>(nul) - buf);
      return out->size() <= max;
    }
    out->append(buf, chunk);
    addr += chunk;
  }
  return false;
}

// The fields of /proc/PID/status the supervisor needs.
struct TaskStatus {
  int threads = 0;
  pid_t ppid = 0;
};

bool ReadStatus(pid_t pid, TaskStatus* st) {
  OwnedFd fd(open(ProcPath(pid, "status").c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return false;
  char buf[8192];
  ssize_t n = read(fd.get(), buf, sizeof(buf) - 1);
  if (n <= 0) return false;
  absl::string_view text(buf, static_cast<size_t>(n));
  bool have_threads = false, have_ppid = false;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::ConsumePrefix(&line, "Threads:")) {
      have_threads = absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &st->threads);
    } else if (absl::ConsumePrefix(&line, "PPid:")) {
      int ppid = 0;
      have_ppid = absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &ppid);
      st->ppid = ppid;
    }
  }
  return have_threads && have_ppid;
}

// "" when no other task can write the memory of `pid` while its exec is stopped, else
// why not. A vfork child shares its parent's memory; the parent is blocked until the
// child execs, but the parent's other threads are not.
// `*shared`: the memory is (or may be) shared with a vfork parent, which can still
// change it by dying (its clear_child_tid and robust-futex writes at exit): such an exec
// is checked again after the fact (ExecSupervisor::CheckPending).
std::string WhoElseCanWrite(pid_t pid, bool* shared) {
  *shared = false;
  TaskStatus st;
  if (!ReadStatus(pid, &st)) return "its status cannot be read";
  if (st.threads != 1) return absl::StrCat("it has ", st.threads, " threads");
  for (int depth = 0; depth < 8 && st.ppid > 1; ++depth) {
    pid_t parent = st.ppid;
    long same = syscall(SYS_kcmp, pid, parent, KCMP_VM, 0, 0);
    if (same != 0 && same != -1) return "";  // its own memory
    *shared = true;
    TaskStatus pst;
    if (!ReadStatus(parent, &pst)) {
      if (same == 0) return "its memory is shared with a parent that cannot be read";
      return "";  // parent gone: nothing shares the memory
    }
    if (pst.threads != 1) {
      return same == 0 ? absl::StrCat("it shares its memory with a parent of ", pst.threads,
                                      " threads")
                       : "its memory sharing cannot be checked";
    }
    if (same != 0) return "";  // kcmp failed: a single-threaded parent cannot race
    pid = parent;
    st = pst;
  }
  return "";
}

struct Mapping {
  uint64_t start = 0, end = 0;
  bool shared = false;
  uint64_t inode = 0;
  std::string name;
};

std::vector<Mapping> ReadMaps(pid_t pid) {
  std::vector<Mapping> maps;
  OwnedFd fd(open(ProcPath(pid, "maps").c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return maps;
  std::string text;
  char buf[65536];
  ssize_t n;
  while ((n = read(fd.get(), buf, sizeof(buf))) > 0) text.append(buf, static_cast<size_t>(n));
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    // start-end perms offset dev inode [name]
    std::vector<absl::string_view> f =
        absl::StrSplit(line, absl::MaxSplits(' ', 5), absl::SkipEmpty());
    if (f.size() < 5) continue;
    Mapping m;
    size_t dash = f[0].find('-');
    if (dash == absl::string_view::npos ||
        !absl::SimpleHexAtoi(f[0].substr(0, dash), &m.start) ||
        !absl::SimpleHexAtoi(f[0].substr(dash + 1), &m.end) || f[1].size() < 4 ||
        !absl::SimpleAtoi(f[4], &m.inode)) {
      continue;
    }
    m.shared = f[1][3] == 's';
    if (f.size() > 5) m.name = std::string(absl::StripLeadingAsciiWhitespace(f[5]));
    maps.push_back(std::move(m));
  }
  return maps;
}

// Checks that [addr, addr+len) lies in memory only this process can change: private
// anonymous memory, or a private mapping of a file on a read-only mount (a private
// file mapping shows later writes to the file until the page is copied).
class StableMemory {
 public:
  explicit StableMemory(pid_t pid) : pid_(pid) {}
  std::string Check(uint64_t addr, size_t len) {
    if (!loaded_) {  // read once, on first use
      maps_ = ReadMaps(pid_);
      checked_.assign(maps_.size(), 0);
      loaded_ = true;
    }
    uint64_t end = addr + (len == 0 ? 1 : len);
    for (size_t i = 0; i < maps_.size() && addr < end; ++i) {
      const Mapping& m = maps_[i];
      if (m.end <= addr || m.start >= end) continue;
      if (m.start > addr) return "its arguments lie partly outside its mappings";
      if (m.shared) return "its arguments lie in shared memory";
      if (m.inode != 0) {
        if (checked_[i] == 0) checked_[i] = FileIsReadOnly(m) ? 1 : 2;
        if (checked_[i] == 2) return "its arguments lie in a mapping of a writable file";
      }
      addr = m.end;
    }
    if (addr < end) return "its arguments lie outside its mappings";
    return "";
  }

 private:
  bool FileIsReadOnly(const Mapping& m) {
    char rest[64];
    snprintf(rest, sizeof(rest), "map_files/%lx-%lx", static_cast<unsigned long>(m.start),
             static_cast<unsigned long>(m.end));
    OwnedFd fd(open(ProcPath(pid_, rest).c_str(), O_PATH | O_CLOEXEC));
    if (fd.get() >= 0) {
      struct stat st;
      return fstat(fd.get(), &st) == 0 && st.st_ino == m.inode && OnReadOnlyMount(fd.get()) &&
             !WritableElsewhere(st);
    }
    // map_files needs CAP_SYS_ADMIN: find the file by its name in the process's view.
    if (m.name.empty() || m.name[0] != '/') return false;
    int err = 0;
    auto path = ResolveForExec(pid_, "/", m.name, &err);
    if (!path.ok()) return false;
    OwnedFd root(open(ProcPath(pid_, "root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (root.get() < 0) return false;
    struct stat st;
    return fstatat(root.get(), path->c_str() + 1, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
           st.st_ino == m.inode && !WritableElsewhere(st);
  }

  pid_t pid_;
  bool loaded_ = false;
  std::vector<Mapping> maps_;
  std::vector<char> checked_;  // 0 unknown, 1 read-only file, 2 writable
};

absl::Status NotFound(int* err, int code, absl::string_view what) {
  *err = code;
  return absl::NotFoundError(what);
}

void Respond(int listener, seccomp_notif* req, seccomp_notif_resp* resp, bool allow,
             int error) {
  memset(resp, 0, sizeof(*resp));
  resp->id = req->id;
  if (allow) {
    resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
  } else {
    resp->error = -error;
  }
  // ENOENT: the process died or its system call was interrupted meanwhile.
  (void)seccomp_notify_respond(listener, resp);
}

bool Matches(const TrustedExec& t, const ExecRequest& x) {
  return t.path == x.path && t.argv == x.argv;
}

ExecRecord MakeRecord(const ExecRequest& x, const ExecVerdict& v) {
  ExecRecord r;
  r.executable = x.executable.empty() ? x.path.substr(0, kClipArg) : x.executable;
  for (size_t i = 0; i < x.argv.size() && i < kRecordedArgs; ++i) {
    r.argv.push_back(x.argv[i].substr(0, kClipArg));
  }
  r.allowed = v.allowed;
  r.rule_id = v.rule_id;
  r.reason = v.reason;
  return r;
}

ExecVerdict Refuse(absl::string_view id, absl::string_view why) {
  return {false, std::string(id), absl::StrCat("rule:", id, ": ", why)};
}

// The identity of `path` in the view of `pid`, or with "" of the file it runs.
bool FileIdentity(pid_t pid, const std::string& path, dev_t* dev, ino_t* ino) {
  struct stat st;
  if (path.empty()) {
    if (stat(ProcPath(pid, "exe").c_str(), &st) != 0) return false;
  } else {
    OwnedFd root(open(ProcPath(pid, "root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (root.get() < 0 || fstatat(root.get(), path.c_str() + 1, &st, 0) != 0) return false;
  }
  *dev = st.st_dev;
  *ino = st.st_ino;
  return true;
}

// The argv the kernel gave the process's current program (/proc/PID/cmdline).
std::vector<std::string> ReadCmdline(pid_t pid) {
  std::vector<std::string> argv;
  OwnedFd fd(open(ProcPath(pid, "cmdline").c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return argv;
  std::string text;
  char buf[65536];
  ssize_t n;
  while ((n = read(fd.get(), buf, sizeof(buf))) > 0 && text.size() < (kMaxArgvBytes + 4096)) {
    text.append(buf, static_cast<size_t>(n));
  }
  if (text.empty() || text.back() != '\0') return argv;
  for (absl::string_view a : absl::StrSplit(absl::string_view(text.data(), text.size() - 1), '\0')) {
    argv.emplace_back(a);
  }
  return argv;
}

}  // namespace

int InstallExecNotifyFilter(const std::string& program) {
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
  sock_fprog prog;
  prog.len = static_cast<unsigned short>(program.size() / sizeof(sock_filter));
  prog.filter = reinterpret_cast<sock_filter*>(const_cast<char*>(program.data()));
  return static_cast<int>(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                                  SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog));
}

bool SendFd(int sock, int fd) {
  char byte = 'F';
  iovec iov = {&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  memset(control, 0, sizeof(control));
  msghdr msg;
  memset(&msg, 0, sizeof(msg));
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &fd, sizeof(int));
  return sendmsg(sock, &msg, MSG_NOSIGNAL) == 1;
}

int ReceiveFd(int sock, int timeout_ms) {
  pollfd p = {sock, POLLIN, 0};
  int ready;
  while ((ready = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR) {
  }
  if (ready <= 0) return -1;
  char byte;
  iovec iov = {&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  msghdr msg;
  memset(&msg, 0, sizeof(msg));
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  if (recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) != 1) return -1;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  if (c == nullptr || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
      c->cmsg_len != CMSG_LEN(sizeof(int))) {
    return -1;
  }
  int fd;
  memcpy(&fd, CMSG_DATA(c), sizeof(int));
  return fd;
}

absl::StatusOr<std::string> ResolveForExec(pid_t pid, absl::string_view cwd,
                                           absl::string_view path, int* err) {
  if (path.empty()) return NotFound(err, ENOENT, "empty path");
  if (path.size() > kMaxPath) return NotFound(err, ENAMETOOLONG, "path too long");
  OwnedFd root(open(ProcPath(pid, "root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (root.get() < 0) return NotFound(err, ESRCH, "the process is gone");
  if (!OnReadOnlyMount(root.get())) {
    return absl::PermissionDeniedError("the root of the sandbox is writable");
  }
  std::deque<std::string> todo;
  auto push_front = [&](absl::string_view p) {
    std::vector<std::string> parts = absl::StrSplit(p, '/', absl::SkipEmpty());
    todo.insert(todo.begin(), parts.begin(), parts.end());
  };
  push_front(path);
  if (path[0] != '/') push_front(cwd);
  // Directories walked, root first; names[i] is the name of stack[i + 1].
  std::vector<OwnedFd> stack;
  std::vector<std::string> names;
  auto top = [&] { return stack.empty() ? root.get() : stack.back().get(); };
  int links = 0;
  while (!todo.empty()) {
    std::string comp = std::move(todo.front());
    todo.pop_front();
    if (comp == ".") continue;
    if (comp == "..") {
      // Never above the sandbox's root (the kernel's ".." stops there too).
      if (!stack.empty()) {
        stack.pop_back();
        names.pop_back();
      }
      continue;
    }
    OwnedFd fd(openat(top(), comp.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (fd.get() < 0) return NotFound(err, errno, "not found");
    struct stat st;
    if (fstat(fd.get(), &st) != 0) return NotFound(err, EACCES, "cannot stat");
    if (S_ISLNK(st.st_mode)) {
      // The link lives in the directory on top, already checked read-only.
      if (++links > kMaxLinks) return NotFound(err, ELOOP, "too many links");
      char target[kMaxPath + 1];
      ssize_t n = readlinkat(fd.get(), "", target, kMaxPath);
      if (n <= 0) return NotFound(err, ENOENT, "unreadable link");
      absl::string_view t(target, static_cast<size_t>(n));
      push_front(t);
      if (t[0] == '/') {
        stack.clear();
        names.clear();
      }
      continue;
    }
    if (!OnReadOnlyMount(fd.get())) {
      std::string where = "/";
      for (const auto& n : names) absl::StrAppend(&where, n, "/");
      return absl::PermissionDeniedError(
          absl::StrCat("'", where, comp, "' is on a writable mount (it could be swapped)"));
    }
    if (S_ISDIR(st.st_mode)) {
      stack.push_back(std::move(fd));
      names.push_back(comp);
      continue;
    }
    if (!todo.empty()) return NotFound(err, ENOTDIR, "not a directory");
    if (!S_ISREG(st.st_mode)) return NotFound(err, EACCES, "not a regular file");
    // Its bytes (a "#!" line, PT_INTERP) are read to decide: they must not change after.
    if (WritableElsewhere(st)) {
      return absl::PermissionDeniedError(absl::StrCat(
          "'", comp, "' has another name (a hard link) through which it could be rewritten"));
    }
    std::string out;
    for (const auto& n : names) absl::StrAppend(&out, "/", n);
    absl::StrAppend(&out, "/", comp);
    return out;
  }
  return NotFound(err, EACCES, "a directory");
}

ExecSupervisor::ExecSupervisor(int listener, std::vector<TrustedExec> trusted,
                               ExecDecider decide)
    : listener_(listener), trusted_(std::move(trusted)), decide_(std::move(decide)) {
  seccomp_notif* req = nullptr;
  seccomp_notif_resp* resp = nullptr;
  if (seccomp_notify_alloc(&req, &resp) == 0) {
    req_ = req;
    resp_ = resp;
  }
}

ExecSupervisor::~ExecSupervisor() {
  if (req_ != nullptr) {
    seccomp_notify_free(static_cast<seccomp_notif*>(req_),
                        static_cast<seccomp_notif_resp*>(resp_));
  }
  if (listener_ >= 0) close(listener_);
}

// The first bytes of `path` (absolute in the view of `pid`; every component on a
// read-only mount, so the name still leads to the file just resolved).
std::string ReadHead(pid_t pid, const std::string& path) {
  OwnedFd root(open(ProcPath(pid, "root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (root.get() < 0) return "";
  OwnedFd fd(openat(root.get(), path.c_str() + 1, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (fd.get() < 0) return "";
  std::string head(kExecHeadBytes, '\0');
  ssize_t n = pread(fd.get(), head.data(), head.size(), 0);
  head.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return head;
}

ExecVerdict ExecSupervisor::DecideFormat(const ExecRequest& x, int depth) {
  const ExecFormat f = ReadExecFormat(ReadHead(x.pid, x.executable));
  const std::string file = absl::StrCat("'", x.executable, "'");
  if (!f.problem.empty()) return Refuse("exec_format", absl::StrCat(file, ": ", f.problem));
  if (f.kind == ExecFormat::kElf) {
    if (f.interpreter.empty()) return {true, "", ""};  // static
    // The kernel runs PT_INTERP first: it must be the system's dynamic loader, not a
    // program the rules never saw.
    int err = 0;
    if (loader_.empty()) {
      auto loader = ResolveForExec(x.pid, "/", kSystemLoader, &err);
      if (loader.ok()) loader_ = *loader;
    }
    auto interp = ResolveForExec(x.pid, x.cwd, f.interpreter, &err);
    if (!interp.ok() || loader_.empty() || *interp != loader_) {
      return Refuse("exec_loader", absl::StrCat(file, " names '", f.interpreter.substr(0, 200),
                                                "' as its loader, not the system's"));
    }
    return {true, "", ""};
  }
  // A script: the kernel runs its interpreter with [interpreter, arg?, path, argv[1..]];
  // the rules decide that too, and so on for an interpreter that is itself a script.
  if (depth >= 4) return Refuse("exec_format", absl::StrCat(file, ": scripts nested too deeply"));
  int err = 0;
  auto interp = ResolveForExec(x.pid, x.cwd, f.interpreter, &err);
  if (!interp.ok()) {
    return Refuse("exec_interpreter",
                  absl::StrCat(file, ": its interpreter '", f.interpreter.substr(0, 200), "' ",
                               interp.status().code() == absl::StatusCode::kPermissionDenied
                                   ? interp.status().message()
                                   : "is not in the sandbox"));
  }
  ExecRequest y;
  y.pid = x.pid;
  y.cwd = x.cwd;
  y.path = f.interpreter;
  y.executable = *interp;
  y.argv.push_back(f.interpreter);
  if (!f.interpreter_arg.empty()) y.argv.push_back(f.interpreter_arg);
  y.argv.push_back(x.path);
  y.argv.insert(y.argv.end(), x.argv.begin() + (x.argv.empty() ? 0 : 1), x.argv.end());
  ExecVerdict v = decide_(y);
  if (!v.allowed) {
    v.reason = absl::StrCat(v.reason, " (the interpreter of ", file, ")");
    return v;
  }
  final_executable_ = y.executable;  // what the kernel will finally run, and how
  final_argv_ = y.argv;
  return DecideFormat(y, depth + 1);
}

bool ExecSupervisor::HandleOne() {
  auto* req = static_cast<seccomp_notif*>(req_);
  auto* resp = static_cast<seccomp_notif_resp*>(resp_);
  if (req == nullptr || listener_ < 0) return false;
  // The kernel refuses a request that is not zeroed (EINVAL). libseccomp returns
  // -errno.
  memset(req, 0, sizeof(*req));
  int rc = seccomp_notify_receive(listener_, req);
  if (rc != 0) return rc == -ENOENT || rc == -EINTR;  // the task went away meanwhile
  const int64_t t0 = SystemClock().MonotonicMicros();
  ExecRequest x;
  x.pid = static_cast<pid_t>(req->pid);
  ExecVerdict v;
  bool record = true;
  int answer_errno = EACCES;
  uint64_t path_ptr = 0, argv_ptr = 0;
  bool relative_to_fd = false;
  if (req->data.nr == __NR_execve) {
    path_ptr = req->data.args[0];
    argv_ptr = req->data.args[1];
  } else if (req->data.nr == __NR_execveat) {
    path_ptr = req->data.args[1];
    argv_ptr = req->data.args[2];
    relative_to_fd = static_cast<int>(req->data.args[0]) != AT_FDCWD || req->data.args[4] != 0;
  }
  StableMemory memory(x.pid);
  bool shared = false;
  // Reads the path and argv; on failure sets `refusal` to the rule and reason.
  std::pair<std::string, std::string> refusal;
  auto unstable_if = [&](std::string why) {
    if (!why.empty()) refusal = {"exec_unstable", std::move(why)};
    return refusal.first.empty();
  };
  auto unreadable_if = [&](bool failed, const char* why) {
    if (failed) refusal = {"exec_unreadable", why};
    return !failed;
  };
  // Before the set-up's last exec only Gantry's own code has run in these processes,
  // so nothing can race the read: the stability checks start with the command.
  const bool setup = next_trusted_ < trusted_.size();
  auto check = [&](uint64_t addr, size_t len) {
    return setup || unstable_if(memory.Check(addr, len));
  };
  auto read_all = [&] {
    if (!setup && !unstable_if(WhoElseCanWrite(x.pid, &shared))) return;
    if (!unreadable_if(!ReadString(x.pid, path_ptr, kMaxPath, &x.path), "its path cannot be read"))
      return;
    if (!check(path_ptr, x.path.size() + 1)) return;
    size_t bytes = 0;
    // The argv pointers, read up to a page boundary at a time.
    uint64_t pointers[512];
    size_t have = 0, first = 0;
    for (size_t i = 0; argv_ptr != 0; ++i) {
      if (!unreadable_if(i >= kMaxArgc, "more than 4096 arguments")) return;
      uint64_t at = argv_ptr + i * sizeof(uint64_t);
      if (i >= first + have) {
        size_t room = (4096 - static_cast<size_t>(at % 4096)) / sizeof(uint64_t);
        have = std::max<size_t>(1, std::min<size_t>(room, 512));
        first = i;
        if (!unreadable_if(!ReadMemory(x.pid, at, pointers, have * sizeof(uint64_t)),
                           "its argv cannot be read")) {
          return;
        }
        if (!check(at, have * sizeof(uint64_t))) return;
      }
      uint64_t p = pointers[i - first];
      if (p == 0) break;
      std::string arg;
      if (!unreadable_if(!ReadString(x.pid, p, kMaxArgvBytes - bytes, &arg),
                         "its arguments exceed 1 MiB")) {
        return;
      }
      if (!check(p, arg.size() + 1)) return;
      bytes += arg.size() + 1;
      x.argv.push_back(std::move(arg));
    }
  };
  read_all();
  if (next_trusted_ < trusted_.size()) {
    if (refusal.first.empty() && Matches(trusted_[next_trusted_], x)) {
      ++next_trusted_;
      Respond(listener_, req, resp, true, 0);
      return true;
    }
    next_trusted_ = trusted_.size();  // the set-up went wrong: trust nothing more
    v = Refuse("exec_setup", "an exec the sandbox's set-up did not expect");
  } else if (req->data.nr != __NR_execve && req->data.nr != __NR_execveat) {
    v = Refuse("exec_unknown", "an unexpected system call");
  } else if (refusal.first == "exec_unstable") {
    v = Refuse(refusal.first, absl::StrCat("exec refused: ", refusal.second,
                                           ", so its arguments could change after the check"));
  } else if (!refusal.first.empty()) {
    v = Refuse(refusal.first, absl::StrCat("exec refused: ", refusal.second));
  } else if (relative_to_fd && (x.path.empty() || x.path[0] != '/')) {
    v = Refuse("exec_fd", "exec of a descriptor or relative to one is refused");
  } else if (x.argv.empty() || x.argv[0].empty()) {
    v = Refuse("exec_argv", "exec with an empty argv[0] is refused");
  } else {
    // The working directory, which relative paths and operands are read against. One
    // that cannot be read whole (deeper than 4 KiB of path: readlink fails; deleted) is
    // refused, never taken for "/" (found by a red team: a deep cwd made every relative
    // path and operand be decided as if the process were in "/").
    char cwd[kMaxPath + 1];
    ssize_t n = readlink(ProcPath(x.pid, "cwd").c_str(), cwd, kMaxPath);
    const bool cwd_ok = n > 0 && n < static_cast<ssize_t>(kMaxPath) && cwd[0] == '/' &&
                        !absl::EndsWith(absl::string_view(cwd, static_cast<size_t>(n)), " (deleted)");
    if (cwd_ok) x.cwd.assign(cwd, static_cast<size_t>(n));
    int err = 0;
    absl::StatusOr<std::string> exe = absl::FailedPreconditionError("cwd");
    if (cwd_ok) exe = ResolveForExec(x.pid, x.cwd, x.path, &err);
    if (!cwd_ok) {
      v = Refuse("exec_cwd",
                 "exec refused: its working directory cannot be read whole (too deep or deleted)");
    } else if (exe.ok()) {
      x.executable = *exe;
      final_executable_ = x.executable;
      final_argv_ = x.argv;
      v = decide_(x);
      if (v.allowed) {
        ExecVerdict format = DecideFormat(x, 0);
        if (!format.allowed) v = format;
      }
    } else if (exe.status().code() == absl::StatusCode::kPermissionDenied) {
      v = Refuse("exec_writable",
                 absl::StrCat("exec refused: ", exe.status().message()));
    } else {
      // What the kernel itself would answer; nothing to decide.
      record = false;
      answer_errno = err != 0 ? err : ENOENT;
    }
  }
  // After every read of the process (its memory, /proc/PID/...): if the notification
  // is no longer pending, the pid may name another process by now, and nothing read
  // counts. Not answered: the kernel has already failed or restarted the call.
  if (seccomp_notify_id_valid(listener_, req->id) != 0) return true;
  // Every allowed exec is traced from here, so that the kernel stops it after the exec
  // and before the new program's first instruction, where the file it runs and the
  // argv it was given are checked against what was decided. Whatever changed the path,
  // the file or the arguments between the decision and the kernel's own reading (a
  // vfork parent's memory, a grandchild re-parented so that nothing seemed to share it,
  // a file renamed into place by another writer: red teams' ways) is caught there.
  Pending pending;
  if (v.allowed) {
    pending.pid = x.pid;
    pending.argv = final_argv_;
    pending.shared = shared;
    const bool seized = std::any_of(pending_.begin(), pending_.end(),
                                    [&](const Pending& p) { return p.pid == x.pid; }) ||
                        ptrace(PTRACE_SEIZE, x.pid, nullptr,
                               reinterpret_cast<void*>(PTRACE_O_TRACEEXEC |
                                                       PTRACE_O_EXITKILL)) == 0;
    if (!seized || !FileIdentity(x.pid, final_executable_, &pending.dev, &pending.ino)) {
      v = Refuse("exec_unverifiable", "exec refused: it cannot be checked after the exec");
    }
  }
  Respond(listener_, req, resp, v.allowed, answer_errno);
  if (!record) return true;
  ++decided_;
  if (!v.allowed) ++denied_;
  if (records_.size() < kMaxRecords) {
    records_.push_back(MakeRecord(x, v));
    records_.back().decide_us = static_cast<uint64_t>(SystemClock().MonotonicMicros() - t0);
    pending.record = records_.size() - 1;
  }
  if (v.allowed) {
    pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                  [&](const Pending& p) { return p.pid == x.pid; }),
                   pending_.end());
    pending_.push_back(std::move(pending));
  }
  return true;
}

void ExecSupervisor::CheckPending() {
  for (size_t i = 0; i < pending_.size();) {
    Pending& p = pending_[i];
    int status = 0;
    pid_t got = waitpid(p.pid, &status, WNOHANG | __WALL);
    if (got == 0) {  // not stopped yet
      ++i;
      continue;
    }
    if (got < 0 || WIFEXITED(status) || WIFSIGNALED(status)) {
      pending_.erase(pending_.begin() + static_cast<long>(i));
      continue;
    }
    if (WIFSTOPPED(status) && (status >> 8) == (SIGTRAP | (PTRACE_EVENT_EXEC << 8))) {
      dev_t dev = 0;
      ino_t ino = 0;
      const bool same_file = FileIdentity(p.pid, "", &dev, &ino) && dev == p.dev && ino == p.ino;
      const bool same_argv = ReadCmdline(p.pid) == p.argv;
      if (same_file && same_argv) {
        ptrace(PTRACE_DETACH, p.pid, nullptr, nullptr);
      } else {
        kill(p.pid, SIGKILL);
        ++denied_;
        if (p.record < records_.size()) {
          ExecRecord& r = records_[p.record];
          r.allowed = false;
          r.rule_id = "exec_changed";
          r.reason = absl::StrCat("rule:exec_changed: killed before it ran: its ",
                                  same_file ? "argv" : "file",
                                  " changed after the check", p.shared ? " (memory shared with a "
                                  "vfork parent)" : "");
        }
      }
    } else if (WIFSTOPPED(status)) {
      // Any other stop comes before an exec that has not happened (it failed): let the
      // process go on as it would have, with its signal.
      const int sig = (status >> 8) == SIGTRAP ? 0 : WSTOPSIG(status);
      ptrace(PTRACE_DETACH, p.pid, nullptr, reinterpret_cast<void*>(static_cast<long>(sig)));
    }
    pending_.erase(pending_.begin() + static_cast<long>(i));
  }
}

}  // namespace gantry::sandbox
