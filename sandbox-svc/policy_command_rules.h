// Command rules from the access policy (docs/policy.md, grants[i].commands): the rule
// set of one principal, for DecideCommand (command_rules.h).
//
// Which rules apply to a call: ToolGrant.exec_rules names a user or service account of
// the policy in force, and that principal's effective command grant decides, built by
// the policy library exactly as for `gantry policy explain --command` (its own grants
// and its groups'; within a grant the rules for one executable are alternatives, every
// grant naming the executable must allow, an explicit deny wins). The sandbox adds
// what the policy leaves to it: argv[0] and every wrapped program are resolved inside
// the sandbox and unwrapped (command_rules.h), and each program is then asked of the
// policy as the argv [executable, its own options and arguments...] with relative
// operands read against its working directory (PolicyRequest::command_cwd) and every
// operand also read through the sandbox's view (PolicyRequest::operand_resolver,
// ExecutableResolver::ResolveOperand): its real path must match the operand globs too,
// and a dangling link is denied. git's
// global options (-C DIR, --no-pager, ...), which the unwrapping sets apart, are put
// after the subcommand, so that `subcommands` still sees the subcommand first and
// every option is still checked as a flag (and -C's directory as an operand).
//
// A policy names executables by path (/usr/bin/python3); a program resolves to the real
// file (/usr/bin/python3.11). So each of the principal's executable paths is resolved
// in the sandbox's view once, and a resolved program is checked against every path
// that resolves to it: all of them must allow, a deny of any of them denies. Two paths
// name nothing but themselves (so no real program matches them): a /workspace path
// whose links lead out of the workspace (whoever writes the workspace chooses where
// they lead: `tool -> /lib64/ld-linux-x86-64.so.2` must not make the loader a granted
// program), and any path that leads to the system loader without being its own path
// (kSystemLoader or its real path): the loader runs any file as a program.
//
// Denials read "rule:<policy rule id>: <the policy's message>", e.g.
// "rule:default_deny: no grant of 'harness' names executable '/usr/bin/rm'" or
// "rule:grants[5].commands[0]: '/usr/bin/git': subcommand 'push' is not one of [...]".
//
// Thread-safety: immutable after construction; Names/Check are thread-safe.
#ifndef GANTRY_SANDBOX_SVC_POLICY_COMMAND_RULES_H_
#define GANTRY_SANDBOX_SVC_POLICY_COMMAND_RULES_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "policy/policy_types.h"
#include "sandbox-svc/command_rules.h"
#include "sandbox-svc/executable_resolver.h"

namespace gantry::sandbox {

class PolicyCommandRules : public CommandRuleSet {
 public:
  // The rules of `principal` (a user or service account name) in `snapshot` (not null).
  // An unknown principal is not an error here: every program is then denied with
  // rule "default_deny". `resolver` resolves the policy's executable paths (as Resolve(path, "/")).
  PolicyCommandRules(std::shared_ptr<const policy::Snapshot> snapshot, std::string principal,
                     const ExecutableResolver& resolver);

  bool Names(const std::string& exe, std::string* rule_id, std::string* denial) const override;
  std::string Check(const std::string& exe, const std::vector<std::string>& global_flags,
                    const std::vector<std::string>& args, absl::string_view cwd,
                    const ExecutableResolver& resolver, std::string* rule_id) const override;
  void AppendReadScope(const std::string& exe, ReadScope* scope) const override;

 private:
  std::shared_ptr<const policy::Snapshot> snapshot_;
  std::string principal_name_;
  const policy::Principal* principal_ = nullptr;  // into *snapshot_; null when unknown
  // Resolved path -> the policy's executable paths that resolve to it.
  absl::flat_hash_map<std::string, std::vector<std::string>> by_resolved_;
};

}  // namespace gantry::sandbox

#endif  // GANTRY_SANDBOX_SVC_POLICY_COMMAND_RULES_H_
