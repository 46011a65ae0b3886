// The seccomp filter every sandboxed process runs under, compiled with libseccomp.
//
// Default action: allow. Denied with EPERM: debugging other processes (ptrace,
// process_vm_*, kcmp, pidfd_getfd), mounting and namespaces (mount, umount2,
// pivot_root, the new mount API, unshare, setns, clone with any CLONE_NEW* flag),
// kernel-wide state (kexec_*, *_module, reboot, swapon/off, syslog, acct, quotactl,
// settimeofday, clock_settime, adjtimex), attack surface a tool never needs (bpf,
// perf_event_open, keyctl, add_key, request_key, userfaultfd, io_uring_*, kernel AIO
// (io_setup, io_submit, ...: an asynchronous read could rewrite a stopped exec's
// arguments),
// open_by_handle_at, iopl, ioperm), prlimit64 on another process, and the TIOCSTI /
// TIOCLINUX ioctls, clone(CLONE_VM) without CLONE_THREAD or CLONE_VFORK, clone with
// CLONE_PARENT. clone3 fails with ENOSYS so that libc falls back to clone, whose
// flags the filter can inspect. System calls of another architecture kill the process
// (libseccomp's default for a foreign arch).
//
// Thread-safety: all functions are thread-safe.
#ifndef GANTRY_SANDBOX_SVC_SECCOMP_FILTER_H_
#define GANTRY_SANDBOX_SVC_SECCOMP_FILTER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gantry::sandbox {

// Names of the system calls the filter denies (for docs and tests).
const std::vector<std::string>& DeniedSyscallNames();

// The compiled classic-BPF program (struct sock_filter array) as bytes, the format
// `bwrap --seccomp FD` reads. Built once per process and cached.
// Errors: INTERNAL when libseccomp fails.
absl::StatusOr<std::string> SeccompProgram();

// The exec supervisor's filter (exec_supervisor.h): execve and execveat stop with
// SECCOMP_RET_USER_NOTIF, everything else is allowed (the filter above still applies).
// Same format as SeccompProgram(); installed by the sandbox's set-up child with
// SECCOMP_FILTER_FLAG_NEW_LISTENER. Built once and cached. Errors: INTERNAL.
absl::StatusOr<std::string> ExecNotifyProgram();

// A fresh memfd (close-on-exec, offset 0) holding SeccompProgram(); the caller owns it.
// A fresh one per call because bwrap reads it to EOF and offsets are shared.
// Errors: INTERNAL.
absl::StatusOr<int> SeccompProgramFd();

}  // namespace gantry::sandbox

#endif  // GANTRY_SANDBOX_SVC_SECCOMP_FILTER_H_
