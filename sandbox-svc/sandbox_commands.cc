#include "sandbox-svc/sandbox_commands.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "policy/policy_loader.h"
#include "sandbox-svc/sandbox.h"

namespace gantry::sandbox {
namespace {

constexpr char kUsage[] =
    "Usage: gantry sandbox exec --workspace DIR [--allow-write PATH ...]\n"
    "                           [--rules POLICY --principal NAME] [--cwd DIR] [--wall-ms N]\n"
    "                           -- ARGV...\n"
    "\n"
    "Runs ARGV in a fresh sandbox exactly as gantry-sandbox runs an exec tool call:\n"
    "bubblewrap namespaces without network, the workspace at /workspace read-only except\n"
    "the --allow-write paths (relative to it; 'dir/**' for a whole directory), a noexec\n"
    "/tmp, the seccomp filter, rlimits and a wall-clock timeout (docs/sandbox.md).\n"
    "  --rules POLICY --principal NAME\n"
    "                 decide ARGV first with the command grants of NAME (a user or service\n"
    "                 account) in the access policy file POLICY (docs/policy.md), as\n"
    "                 gantry-sandbox --policy does; without --rules, argv[0] is resolved\n"
    "                 but no command rule applies\n"
    "Every exec inside the sandbox is decided by the same rules before it happens (the\n"
    "exec supervisor); a refused one fails there with EACCES and is listed.\n"
    "Prints the command's stdout and stderr, a line 'gantry-sandbox: exec DENIED <reason>'\n"
    "for each refused exec, then one line on stderr:\n"
    "  gantry-sandbox: outcome=RAN exit=N signal=S resolved=PATH wall_ms=W execs=N\n"
    "  execs_denied=M [truncated]\n"
    "or, for a denial, 'gantry-sandbox: DENIED <reason>'.\n"
    "Exit status: the command's exit status when it ran; 1 denied, timed out or failed;\n"
    "2 usage error. Run it as root for the full isolation (see docs/sandbox.md).\n";

int Usage(const std::string& why) {
  std::fprintf(stderr, "gantry sandbox: %s\n%s", why.c_str(), kUsage);
  return 2;
}

int RunExecCommand(const std::vector<std::string>& args) {
  v1::ToolCall call;
  call.set_call_id("call_cli");
  call.set_task_id("task_cli");
  SandboxOptions options;
  options.isolation_only = true;
  std::string rules_file, principal;
  size_t i = 1;
  for (; i < args.size() && args[i] != "--"; ++i) {
    const std::string& a = args[i];
    if (i + 1 >= args.size()) return Usage(absl::StrCat(a, " needs a value"));
    const std::string& v = args[++i];
    uint32_t n = 0;
    if (a == "--workspace") {
      call.set_workspace(v);
    } else if (a == "--allow-write") {
      call.mutable_grant()->add_write_paths(v);
    } else if (a == "--rules") {
      rules_file = v;
    } else if (a == "--principal") {
      principal = v;
    } else if (a == "--cwd") {
      call.mutable_exec()->set_cwd(v);
    } else if (a == "--wall-ms" && absl::SimpleAtoi(v, &n)) {
      call.mutable_limits()->set_wall_ms(n);
    } else {
      return Usage(absl::StrCat("unknown option '", a, "'"));
    }
  }
  if (i >= args.size() || i + 1 >= args.size()) return Usage("missing '-- ARGV...'");
  if (call.workspace().empty()) return Usage("--workspace is required");
  if (call.workspace()[0] != '/') {
    char cwd[4096];
    if (getcwd(cwd, sizeof(cwd))) call.set_workspace(absl::StrCat(cwd, "/", call.workspace()));
  }
  for (++i; i < args.size(); ++i) call.mutable_exec()->add_argv(args[i]);
  if (rules_file.empty() != principal.empty()) {
    return Usage("--rules and --principal go together");
  }
  if (!rules_file.empty()) {
    auto policy = policy::LoadPolicyFile(rules_file);
    if (!policy.ok()) {
      std::fprintf(stderr, "gantry sandbox: %s\n", std::string(policy.status().message()).c_str());
      return 1;
    }
    options.isolation_only = false;
    call.mutable_grant()->set_exec_rules(principal);
    options.policy = [snapshot = *std::move(policy)] { return snapshot; };
  }
  if (geteuid() != 0) {
    std::fprintf(stderr, "gantry sandbox: warning: not root: no noexec /tmp, no uid drop\n");
  }
  v1::ToolResult r = Sandbox(options).Run(call);
  std::fwrite(r.stdout().data(), 1, r.stdout().size(), stdout);
  std::fflush(stdout);
  std::fwrite(r.stderr().data(), 1, r.stderr().size(), stderr);
  for (const auto& e : r.execs()) {
    if (!e.allowed()) std::fprintf(stderr, "gantry-sandbox: exec DENIED %s\n", e.reason().c_str());
  }
  switch (r.outcome()) {
    case v1::TOOL_DENIED:
      std::fprintf(stderr, "gantry-sandbox: DENIED %s\n", r.denial_reason().c_str());
      return 1;
    case v1::TOOL_ERROR:
      std::fprintf(stderr, "gantry-sandbox: ERROR %s: %s\n", r.error().code().c_str(),
                   r.error().message().c_str());
      return 1;
    default:
      break;
  }
  bool ran = r.outcome() == v1::TOOL_RAN;
  std::fprintf(stderr,
               "gantry-sandbox: outcome=%s exit=%d signal=%d resolved=%s wall_ms=%.1f "
               "execs=%llu execs_denied=%llu%s%s\n",
               ran ? "RAN" : "TIMED_OUT", r.exit_code(), r.term_signal(),
               r.resolved_executable().c_str(), r.usage().wall_us() / 1000.0,
               static_cast<unsigned long long>(r.execs_decided()),
               static_cast<unsigned long long>(r.execs_denied()),
               r.stdout_truncated() ? " stdout_truncated" : "",
               r.stderr_truncated() ? " stderr_truncated" : "");
  return ran ? r.exit_code() : 1;
}

int RunSandbox(const std::vector<std::string>& args) {
  if (args.empty() || args[0] != "exec") return Usage("expected 'exec'");
  return RunExecCommand(args);
}

}  // namespace

const Subcommand kSandboxCommand = {
    "sandbox", "run one command in the tool sandbox (isolation and command rules)", kUsage,
    &RunSandbox};

}  // namespace gantry::sandbox
