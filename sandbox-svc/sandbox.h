// One ToolCall in, one ToolResult out: argument checks, grants, command rules, and the
// isolated run (isolation.h). Every tool runs inside a fresh sandbox: exec runs the
// caller's argv; read_file, list_dir, glob, grep, write_file and edit run fixed
// coreutils commands (sed, ls, find, grep, cat) there, so that they meet the same
// mounts, namespaces, seccomp filter and limits.
//
// Outcomes (docs/protocol.md, "Tool events"): TOOL_DENIED with a "rule:<id>: ..."
// reason for anything the grant or the command rules refuse (nothing runs);
// TOOL_ERROR with a Status for malformed calls (reason "invalid_tool_call") and for
// sandbox failures (reason "internal"); TOOL_TIMED_OUT at the wall limit; TOOL_RAN
// otherwise. Run never throws and never aborts on any ToolCall.
//
// Thread-safety: Run is const and thread-safe; calls run in parallel.
#ifndef GANTRY_SANDBOX_SVC_SANDBOX_H_
#define GANTRY_SANDBOX_SVC_SANDBOX_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gantry/v1/tool.pb.h"
#include "policy/policy_types.h"
#include "sandbox-svc/command_rules.h"
#include "sandbox-svc/isolation.h"

namespace gantry::sandbox {

struct SandboxOptions {
  // The access policy in force (gantry-sandbox --policy, with hot reload), asked once
  // per exec call: ToolGrant.exec_rules names a user or service account of it, whose
  // command grants decide (policy_command_rules.h). May be empty.
  std::function<std::shared_ptr<const policy::Snapshot>()> policy;
  // Rules built in code (tests, the benchmark) are a policy too: policy/command_policy.h.
  // `gantry sandbox exec` without --rules: argv[0] is resolved but no rule applies.
  // Never set by the service.
  bool isolation_only = false;
  // Every exec inside the sandbox decided by the exec supervisor (exec_supervisor.h).
  // Only sandbox_bench turns it off, to measure what it costs.
  bool supervise_exec = true;
  // Ids a call runs as when the service is root and the workspace belongs to root.
  uid_t fallback_uid = 65534;
  gid_t fallback_gid = 65534;
  // Where a call's workspace may be: strictly beneath one of these directories, through
  // directories only root can change (workspace_roots.h). Empty: anywhere (tests,
  // `gantry sandbox exec`); gantry-sandbox requires at least one (--workspace-root).
  std::vector<std::string> workspace_roots;
  // A call's limits: its non-zero fields, else these defaults, never above `ceiling`.
  IsolationLimits defaults;
  IsolationLimits ceiling = {600000, 600, 16ull << 30, 1024, 1ull << 30, 4096,
                             64ull << 20, 16ull << 20, 1ull << 30};
};

class Sandbox {
 public:
  explicit Sandbox(SandboxOptions options) : options_(std::move(options)) {}
  v1::ToolResult Run(const v1::ToolCall& call) const;

 private:
  SandboxOptions options_;
};

// The effective limits of `call` under `options` (pure; exposed for tests).
IsolationLimits EffectiveLimits(const v1::ToolLimits& requested, const SandboxOptions& options);

}  // namespace gantry::sandbox

#endif  // GANTRY_SANDBOX_SVC_SANDBOX_H_
