// The exec supervisor: every execve and execveat of every process in a sandbox is
// decided before it happens, outside the sandbox (docs/sandbox.md, "Exec supervision").
//
// The sandbox's set-up child installs a seccomp filter that stops execve/execveat with
// SECCOMP_RET_USER_NOTIF (InstallExecNotifyFilter) and hands the listener descriptor
// to the service, which runs an ExecSupervisor on it for the life of the call. For each
// stopped exec the supervisor:
//   1. reads the path and argv from the stopped process's memory (process_vm_readv);
//   2. refuses when that memory could change after the read: the caller has more than
//      one thread, shares its memory with a multi-threaded vfork parent, or keeps the
//      strings in a shared mapping or in a private mapping of a file on a writable file
//      system (the kernel reads the strings again after the answer);
//   3. re-validates the notification id (the process may have died or been replaced);
//   4. resolves the executable in the process's own view (/proc/PID/root, its cwd), one
//      component at a time, without following anything it has not checked: every
//      directory walked, every symlink followed and the file itself must lie on a
//      read-only mount, so that nothing the sandbox can write is able to swap the file
//      between this check and the kernel's own lookup;
//   5. asks the ExecDecider (the command rules, or a fixed list for Gantry's own tools)
//      with the resolved path, the argv and the cwd; then reads the file's format
//      (exec_format.h): an ELF's PT_INTERP must be the system's dynamic loader, a "#!"
//      script's interpreter is decided too (with the argv the kernel will give it),
//      anything else is refused (the kernel would try binfmt_misc handlers);
//   6. answers: SECCOMP_USER_NOTIF_FLAG_CONTINUE to let the kernel run it, or EACCES.
//      Every allowed exec is ptrace-seized before it continues, and at its
//      PTRACE_EVENT_EXEC stop, before the new program runs, the file the kernel runs
//      (its device and inode) and the argv it copied must be the decided ones
//      (CheckPending), else it is killed. Steps 2 and 4 keep what they check from
//      changing as far as they can see; this catches what they cannot (a vfork
//      parent's dying writes, a grandchild re-parented away from the memory it shares,
//      a file renamed into place by a writer outside the call).
// A path that does not resolve is answered with the errno the kernel would give
// (ENOENT, ENOTDIR, ELOOP), without a decision: execvp's PATH search works as usual.
// Execs the sandbox makes before the command (bwrap, the init) are matched against the
// exact TrustedExec list the service built, in order, and nothing else is trusted.
//
// What the design assumes (docs/sandbox.md has the threat model): the supervisor reads
// memory that no other task can write while the exec is stopped. Threads, vfork
// parents, shared and writable-file mappings are refused above; ptrace and
// process_vm_writev are denied by the sandbox's seccomp filter; /proc is not mounted in
// the sandbox, so no process can write another's /proc/PID/mem.
//
// Thread-safety: an ExecSupervisor is used by one thread (the call's run loop).
#ifndef GANTRY_SANDBOX_SVC_EXEC_SUPERVISOR_H_
#define GANTRY_SANDBOX_SVC_EXEC_SUPERVISOR_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gantry::sandbox {

// One exec as the supervisor read it from the stopped process.
struct ExecRequest {
  pid_t pid = 0;  // in the service's pid namespace
  // The path argument as the process passed it.
  std::string path;
  std::vector<std::string> argv;
  // The process's working directory, absolute in the sandbox.
  std::string cwd;
  // The file the kernel would run: absolute in the sandbox, every link followed.
  std::string executable;
};

struct ExecVerdict {
  bool allowed = false;
  // The rule that allowed or denied ("" for trusted set-up execs).
  std::string rule_id;
  // With a denial: "rule:<id>: <why>".
  std::string reason;
};

using ExecDecider = std::function<ExecVerdict(const ExecRequest&)>;

// What one decided exec was, for the ToolResult and the ledger.
struct ExecRecord {
  std::string executable;
  std::vector<std::string> argv;  // at most kRecordedArgs, each clipped
  bool allowed = false;
  std::string rule_id;
  std::string reason;
  uint64_t decide_us = 0;  // time from receiving the notification to answering it
};

// An exec of the sandbox's own set-up, allowed when it matches exactly and in order.
struct TrustedExec {
  std::string path;
  std::vector<std::string> argv;
};

inline constexpr size_t kRecordedArgs = 16;
// The dynamic loader every dynamically linked program must name (x86-64).
inline constexpr char kSystemLoader[] = "/lib64/ld-linux-x86-64.so.2";
inline constexpr size_t kMaxRecords = 256;

// Child side, after fork of a multi-threaded process: only raw system calls.
// Sets no_new_privs and installs `program` (ExecNotifyProgram()'s bytes) with
// SECCOMP_FILTER_FLAG_NEW_LISTENER; returns the listener descriptor, or -1.
int InstallExecNotifyFilter(const std::string& program);
// Sends descriptor `fd` over the Unix socket `sock` (SCM_RIGHTS); false on failure.
bool SendFd(int sock, int fd);
// Receives one descriptor from `sock`, waiting at most `timeout_ms`; -1 on failure.
int ReceiveFd(int sock, int timeout_ms);

class ExecSupervisor {
 public:
  // Takes ownership of `listener`. `trusted` are the set-up execs, in order.
  ExecSupervisor(int listener, std::vector<TrustedExec> trusted, ExecDecider decide);
  ~ExecSupervisor();
  ExecSupervisor(const ExecSupervisor&) = delete;
  ExecSupervisor& operator=(const ExecSupervisor&) = delete;

  int fd() const { return listener_; }
  // Receives and answers one notification (call when fd() is readable). Returns false
  // when the listener is finished (every process under the filter is gone).
  bool HandleOne();

  // Decided execs (set-up execs and failed lookups are not recorded), in order; at most
  // kMaxRecords, then only counted.
  const std::vector<ExecRecord>& records() const { return records_; }
  uint64_t decided() const { return decided_; }
  uint64_t denied() const { return denied_; }

  // Allowed execs waiting for their check after the fact: the run loop calls
  // CheckPending (non-blocking) every 100 us while this is true.
  bool HasPending() const { return !pending_.empty(); }
  // For each such exec that has reached its ptrace exec stop: the file it runs and the
  // argv the kernel copied must be what was decided, else it is killed before its first
  // instruction (recorded as rule exec_changed); then it is detached.
  void CheckPending();

 private:
  // The file's format: loader and interpreter checks (see above). `depth` counts
  // nested scripts.
  ExecVerdict DecideFormat(const ExecRequest& x, int depth);

  struct Pending {
    pid_t pid = 0;
    dev_t dev = 0;
    ino_t ino = 0;
    std::vector<std::string> argv;
    size_t record = static_cast<size_t>(-1);
    bool shared = false;  // its memory was shared with a vfork parent
  };
  std::vector<Pending> pending_;
  // The program the kernel finally runs for the exec being decided (the last
  // interpreter of a script chain) and its argv.
  std::string final_executable_;
  std::vector<std::string> final_argv_;

  int listener_;
  std::string loader_;  // the system's dynamic loader in the sandbox's view, once known
  std::vector<TrustedExec> trusted_;
  size_t next_trusted_ = 0;
  ExecDecider decide_;
  std::vector<ExecRecord> records_;
  uint64_t decided_ = 0;
  uint64_t denied_ = 0;
  void* req_ = nullptr;   // struct seccomp_notif*
  void* resp_ = nullptr;  // struct seccomp_notif_resp*
};

// Resolves `path` as process `pid` would execute it (cwd `cwd`, absolute in its view)
// and returns the file's absolute path in that view. Errors: NOT_FOUND (with the errno
// the kernel would give in *err: ENOENT, ENOTDIR, ELOOP, EACCES), PERMISSION_DENIED
// when the walk meets something writable (a swap could change the answer).
// Exposed for tests.
absl::StatusOr<std::string> ResolveForExec(pid_t pid, absl::string_view cwd,
                                           absl::string_view path, int* err);

}  // namespace gantry::sandbox

#endif  // GANTRY_SANDBOX_SVC_EXEC_SUPERVISOR_H_
