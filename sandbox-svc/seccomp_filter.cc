#include "sandbox-svc/seccomp_filter.h"

#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/error_codes.h"
#include "common/status.h"

namespace gantry::sandbox {
namespace {

// The classic-BPF bytes of `ctx` (released here, also on failure).
absl::StatusOr<std::string> Export(scmp_filter_ctx ctx) {
  int fd = memfd_create("gantry-seccomp-export", MFD_CLOEXEC);
  if (fd < 0 || seccomp_export_bpf(ctx, fd) != 0) {
    if (fd >= 0) close(fd);
    seccomp_release(ctx);
    return ReasonError("internal", "seccomp: export");
  }
  seccomp_release(ctx);
  std::string program;
  lseek(fd, 0, SEEK_SET);
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) program.append(buf, static_cast<size_t>(n));
  close(fd);
  if (program.empty()) return ReasonError("internal", "seccomp: empty program");
  return program;
}

absl::StatusOr<std::string> Build() {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == nullptr) return ReasonError("internal", "seccomp_init failed");
  auto fail = [&](const std::string& what) {
    seccomp_release(ctx);
    return ReasonError("internal", absl::StrCat("seccomp: ", what));
  };
  const uint32_t deny = SCMP_ACT_ERRNO(EPERM);
  for (const std::string& name : DeniedSyscallNames()) {
    int nr = seccomp_syscall_resolve_name(name.c_str());
    if (nr == __NR_SCMP_ERROR) continue;  // not on this architecture
    if (seccomp_rule_add(ctx, deny, nr, 0) != 0) return fail(absl::StrCat("rule ", name));
  }
  if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0) != 0) {
    return fail("clone3");
  }
  // clone's flags are its first argument on x86-64 and arm64: deny any CLONE_NEW*.
  for (unsigned long flag : {CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER,
                             CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP}) {
    if (seccomp_rule_add(ctx, deny, SCMP_SYS(clone), 1,
                         SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag)) != 0) {
      return fail("clone flags");
    }
  }
  // A process that shares its memory without being a thread or a vfork child
  // (clone(CLONE_VM) alone) could rewrite another's execve arguments after the exec
  // supervisor read them; threads and vfork parents are what the supervisor checks.
  if (seccomp_rule_add(ctx, deny, SCMP_SYS(clone), 1,
                       SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_VM | CLONE_THREAD | CLONE_VFORK,
                               CLONE_VM)) != 0) {
    return fail("clone(CLONE_VM)");
  }
  // A process that shares its working directory (and root) without being a thread
  // (clone(CLONE_FS), also with CLONE_VFORK): it could chdir between the supervisor's
  // reading of a stopped exec's cwd and the kernel's lookup of its relative path, so
  // that the kernel runs another file than the one decided (found by a red team:
  // `p -> /usr/bin/cat` decided, `p -> ld.so` run). Threads are what the supervisor
  // checks (an exec from a multi-threaded process is refused); fork, vfork and
  // posix_spawn do not share it.
  if (seccomp_rule_add(ctx, deny, SCMP_SYS(clone), 1,
                       SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_FS | CLONE_THREAD, CLONE_FS)) != 0) {
    return fail("clone(CLONE_FS)");
  }
  // clone(CLONE_PARENT): a vfork child whose parent of record is not the process it
  // shares memory with would hide that process from the supervisor's check.
  if (seccomp_rule_add(ctx, deny, SCMP_SYS(clone), 1,
                       SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_PARENT, CLONE_PARENT)) != 0) {
    return fail("clone(CLONE_PARENT)");
  }
  // AF_VSOCK is not confined by the network namespace: it reaches the host and its
  // hypervisor's services.
  if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
                       SCMP_A0(SCMP_CMP_EQ, AF_VSOCK)) != 0) {
    return fail("socket(AF_VSOCK)");
  }
  // prlimit64(pid, ...) on anything but the caller itself (pid 0).
  if (seccomp_rule_add(ctx, deny, SCMP_SYS(prlimit64), 1, SCMP_A0(SCMP_CMP_NE, 0)) != 0) {
    return fail("prlimit64");
  }
  for (unsigned long request : {static_cast<unsigned long>(TIOCSTI),
                                static_cast<unsigned long>(TIOCLINUX)}) {
    if (seccomp_rule_add(ctx, deny, SCMP_SYS(ioctl), 1,
                         SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, request)) != 0) {
      return fail("ioctl");
    }
  }
  return Export(ctx);
}

absl::StatusOr<std::string> BuildExecNotify() {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == nullptr) return ReasonError("internal", "seccomp_init failed");
  if (seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(execve), 0) != 0 ||
      seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(execveat), 0) != 0) {
    seccomp_release(ctx);
    return ReasonError("internal", "seccomp: notify rules");
  }
  return Export(ctx);
}

}  // namespace

const std::vector<std::string>& DeniedSyscallNames() {
  static const auto* names = new std::vector<std::string>{
      "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
      "mount", "umount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig",
      "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr", "unshare", "setns",
      "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
      "reboot", "swapon", "swapoff", "syslog", "acct", "quotactl", "quotactl_fd",
      "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "bpf",
      "perf_event_open", "keyctl", "add_key", "request_key", "userfaultfd",
      "io_uring_setup", "io_uring_enter", "io_uring_register",
      // Kernel AIO completes reads into user memory asynchronously: an O_DIRECT read
      // could rewrite a stopped exec's path after the exec supervisor read it.
      "io_setup", "io_submit", "io_cancel", "io_getevents", "io_pgetevents", "io_destroy",
      "process_madvise", "process_mrelease",
      "open_by_handle_at",
      "name_to_handle_at", "lookup_dcookie", "iopl", "ioperm", "uselib", "nfsservctl",
      "vhangup", "fanotify_init",
      // Memory outside every file-system and address-space limit: a memfd or a SysV
      // segment filled with fallocate pinned 6 GiB past a 2 GiB RLIMIT_AS (a red team),
      // and a memfd could be mapped executable where every writable place is noexec.
      "memfd_create", "memfd_secret", "shmget"};
  return *names;
}

absl::StatusOr<std::string> SeccompProgram() {
  static const auto* program = new absl::StatusOr<std::string>(Build());
  return *program;
}

absl::StatusOr<std::string> ExecNotifyProgram() {
  static const auto* program = new absl::StatusOr<std::string>(BuildExecNotify());
  return *program;
}

absl::StatusOr<int> SeccompProgramFd() {
  GANTRY_ASSIGN_OR_RETURN(std::string program, SeccompProgram());
  int fd = memfd_create("gantry-seccomp", MFD_CLOEXEC);
  if (fd < 0) return ReasonError("internal", "memfd_create failed");
  size_t off = 0;
  while (off < program.size()) {
    ssize_t n = write(fd, program.data() + off, program.size() - off);
    if (n <= 0) {
      close(fd);
      return ReasonError("internal", "writing the seccomp program failed");
    }
    off += static_cast<size_t>(n);
  }
  lseek(fd, 0, SEEK_SET);
  return fd;
}

}  // namespace gantry::sandbox
