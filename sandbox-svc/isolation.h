// Runs one argument vector in a fresh bubblewrap sandbox and captures what it did.
//
// Layers, outermost first (docs/sandbox.md, "Isolation layers"):
//  1. When the service runs as root, a forked child prepares a private mount
//     namespace: a size-limited tmpfs mounted noexec,nosuid,nodev for the sandbox's
//     /tmp, and the workspace bound by file descriptor at a staging path; then it drops
//     to an unprivileged uid/gid (the workspace owner's, or the fallback) so that
//     RLIMIT_NPROC applies and no host-root file permission is ever used.
//     It also joins a fresh network namespace made ahead of time (loopback only).
//  2. bwrap: new user, pid, net, ipc, uts and cgroup namespaces, no capabilities,
//     no further user namespaces, a read-only root built from /usr (plus the /bin,
//     /lib* links), a few /etc files, /proc, a minimal /dev, /workspace read-only with
//     granted paths read-write, die-with-parent, a new session, the seccomp filter.
//     Before bwrap it installs the exec supervisor's seccomp filter and hands the
//     listener to the service (exec_supervisor.h): every exec in the sandbox after
//     bwrap's and the init's own is decided by IsolationSpec::decide_exec.
//  3. The sandbox's init (sandbox_init_main.cc, embedded: init_image.h) inside the
//     sandbox restricts itself with a Landlock ruleset (the workspace readable only as
//     IsolationSpec::read_scope allows: read_scope.h), sets RLIMIT_CPU, _AS, _NPROC,
//     _FSIZE, _NOFILE, _CORE (set outside they would count the host user's processes)
//     and execs the command.
//  4. Outside: a wall-clock deadline that SIGKILLs bwrap, whose sandbox init then dies
//     by its parent-death signal, taking the whole pid namespace with it; stdout and
//     stderr read up to their caps (then the pipe is closed: the writer gets SIGPIPE);
//     usage from wait4.
//
// Thread-safety: RunIsolated is thread-safe (fork from any thread; no shared state).
#ifndef GANTRY_SANDBOX_SVC_ISOLATION_H_
#define GANTRY_SANDBOX_SVC_ISOLATION_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "sandbox-svc/exec_supervisor.h"
#include "sandbox-svc/program_view.h"
#include "sandbox-svc/read_scope.h"

namespace gantry::sandbox {

// Where the workspace appears inside every sandbox.
inline constexpr char kSandboxWorkspace[] = "/workspace";
// Where the init (init_image.h) appears inside every sandbox: the set-up's last exec.
inline constexpr char kSandboxInit[] = "/gantry-sandbox-init";
// PATH inside every sandbox; command resolution uses the same list.
inline constexpr char kSandboxPath[] = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";

struct IsolationLimits {
  uint32_t wall_ms = 10000;
  uint32_t cpu_seconds = 10;
  uint64_t address_space_bytes = 2ull << 30;
  uint32_t max_processes = 64;
  uint64_t max_file_bytes = 64ull << 20;
  uint32_t max_open_files = 256;
  uint64_t stdout_cap_bytes = 1ull << 20;
  uint64_t stderr_cap_bytes = 256ull << 10;
  uint64_t tmp_bytes = 64ull << 20;
};

struct IsolationSpec {
  // Absolute host path of the workspace, already resolved (no symlinks).
  std::string workspace;
  // Paths relative to the workspace, resolved and checked to stay inside it, that are
  // bound read-write (at most 32). Each must exist. As root, the set-up opens each
  // again beneath the workspace without following any link (openat2 RESOLVE_BENEATH
  // | RESOLVE_NO_SYMLINKS) and binds that descriptor at its stage path, which bwrap
  // binds on: a swap after the check fails the call instead of binding what the link
  // points at. Not root: bwrap binds the path (the race remains; docs/sandbox.md).
  std::vector<std::string> writable;
  // argv[0] is an absolute path as seen inside the sandbox.
  std::vector<std::string> argv;
  // Which workspace files the command's programs may open to read (read_scope.h), made
  // the kernel's rule by Landlock: unconstrained (the default) is the whole workspace.
  // A constrained scope needs Landlock: without it the call fails (set-up exit 125).
  ReadScope read_scope;
  // Working directory relative to the workspace ("" = its root).
  std::string cwd;
  // Environment of the command (it starts empty apart from PATH, HOME=/tmp, LANG=C.UTF-8).
  std::vector<std::pair<std::string, std::string>> env;
  std::string stdin_data;
  IsolationLimits limits;
  // Decides every exec inside the sandbox after the set-up's own (exec_supervisor.h).
  // Empty: every exec is allowed, and still recorded.
  ExecDecider decide_exec;
  // False only for sandbox_bench's comparison: no exec supervisor at all.
  bool supervise_exec = true;
  // When set, the sandbox's /usr holds only what `programs` (absolute paths) need: the
  // links to them, their files, the loader and libraries they load, the library trees
  // of the interpreters among them (program_view.h). Unset: the whole of /usr (gantry
  // sandbox exec without rules).
  bool only_programs = false;
  std::vector<std::string> programs;
};

// Whether the sandbox's /workspace may hold programs: without a program view (no rules),
// or when one of spec.programs is a regular file beneath the workspace (reached without
// a link out of it; an absent path, or one leading to the loader, does not count).
// Otherwise, as root, the workspace
// is mounted noexec (the flag locked outside bwrap's user namespace), so nothing in it
// can be run or mapped executable, even by the loader. Not root, bwrap cannot set
// noexec on a bind and the exec supervisor alone decides (docs/sandbox.md).
bool WorkspaceRunsPrograms(const IsolationSpec& spec);

// The system view: how /bin, /lib, ... exist on this host (Debian 12 links them into
// /usr). Detected once.
struct SystemLayout {
  // Top-level names that are symlinks on the host, with their targets.
  std::vector<std::pair<std::string, std::string>> links;
  // Top-level directories bound read-only besides /usr.
  std::vector<std::string> dirs;
  // /etc entries bound read-only when present.
  std::vector<std::string> etc;
};
const SystemLayout& HostSystemLayout();

// How the forked child runs bwrap.
struct PrivilegeDrop {
  // Prepare the private mount namespace and drop privileges (only when root).
  bool as_root = false;
  uid_t uid = 0;
  gid_t gid = 0;
};

// Stage paths inside the child's private mount namespace (root mode only).
inline constexpr char kStageRoot[] = "/tmp";
inline constexpr char kStageWorkspace[] = "/tmp/ws";
inline constexpr char kStageTmp[] = "/tmp/t";
// Writable grant i is bound at kStageWritable + i ("/tmp/w0", ...).
inline constexpr char kStageWritable[] = "/tmp/w";

// The program view (program_view.h) is assembled here in root mode, then bound as the
// sandbox's /usr.
inline constexpr char kStageUsr[] = "/tmp/u";

// Appends to a bwrap argument vector the program view built by bwrap itself (not root:
// no stage): /usr an empty tmpfs, the view's directories, links, files and trees bound
// read-only into it, then remounted read-only. Pure.
void AppendProgramView(const ProgramView& view, std::vector<std::string>* argv);

// The command line bwrap runs: the init with the call's limits, its Landlock rules and
// read scope, then spec.argv. Pure but for WorkspaceRunsPrograms.
std::vector<std::string> InitArgv(const IsolationSpec& spec, const SystemLayout& layout);

// The bwrap argument vector for `spec` (argv[0] "bwrap"). Pure.
// `view`: the program view of spec.programs when spec.only_programs (else unused).
// `staged`: the stage paths above exist (root mode; the view is then at kStageUsr).
// `own_netns`: the child already joined a fresh network namespace (then bwrap need not
// make one). `seccomp_fd`, `status_fd` and `init_fd` (the init's bytes) are the
// descriptor numbers bwrap will find open.
std::vector<std::string> BuildBwrapArgv(const IsolationSpec& spec, const SystemLayout& layout,
                                        const ProgramView& view, bool staged, bool own_netns,
                                        int seccomp_fd, int status_fd, int init_fd);

struct RunOutcome {
  bool timed_out = false;
  int exit_code = 0;
  // Signal that ended the command (from bwrap's 128+N convention), 0 if none.
  int term_signal = 0;
  std::string stdout_data;
  std::string stderr_data;
  bool stdout_truncated = false;
  bool stderr_truncated = false;
  uint64_t wall_us = 0;
  uint64_t user_cpu_us = 0;
  uint64_t system_cpu_us = 0;
  uint64_t max_rss_bytes = 0;
  // Every exec the supervisor decided, in order (at most kMaxRecords), and the counts.
  std::vector<ExecRecord> execs;
  uint64_t execs_decided = 0;
  uint64_t execs_denied = 0;
};

// The uid/gid a call runs as: when this process is root, the workspace owner, or
// `fallback` when the owner is root; otherwise this process's own ids (no drop).
PrivilegeDrop ChoosePrivilegeDrop(const std::string& workspace, uid_t fallback_uid,
                                  gid_t fallback_gid);

// Runs `spec` and waits for it (at most limits.wall_ms plus clean-up).
// A non-zero exit or a signal is a successful RunOutcome.
// Errors: INTERNAL when the sandbox could not be set up (bwrap missing, fork failure,
// bwrap refused its arguments: the message carries bwrap's stderr);
// INVALID_ARGUMENT for an empty argv or a workspace that cannot be opened.
absl::StatusOr<RunOutcome> RunIsolated(const IsolationSpec& spec, const PrivilegeDrop& drop);

// Path of the bwrap executable (GANTRY_BWRAP overrides; default /usr/bin/bwrap).
std::string BwrapPath();

}  // namespace gantry::sandbox

#endif  // GANTRY_SANDBOX_SVC_ISOLATION_H_
