#include "sandbox-svc/policy_command_rules.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "policy/policy_decide.h"
#include "sandbox-svc/exec_supervisor.h"

namespace gantry::sandbox {
namespace {
constexpr absl::string_view kWorkspacePrefix = "/workspace/";
}  // namespace

PolicyCommandRules::PolicyCommandRules(std::shared_ptr<const policy::Snapshot> snapshot,
                                       std::string principal,
                                       const ExecutableResolver& resolver)
    : snapshot_(std::move(snapshot)), principal_name_(std::move(principal)) {
  auto it = snapshot_->by_name.find(principal_name_);
  if (it == snapshot_->by_name.end()) return;
  principal_ = &snapshot_->principals[it->second];
  auto loader = resolver.Resolve(kSystemLoader, "/");
  for (const auto& [path, access] : principal_->commands) {
    auto real = resolver.Resolve(path, "/");
    std::string key = real.ok() ? *real : path;
    // A workspace path names a workspace file: anyone who can write the workspace
    // chooses where its links lead, so one that leaves it names nothing.
    if (absl::StartsWith(path, kWorkspacePrefix) && !absl::StartsWith(key, kWorkspacePrefix)) {
      key = path;
    }
    // The loader runs any file as a program (ld.so --library-path DIR PROG): only a rule
    // that names it by its own path grants it, never one whose path merely leads there.
    if (loader.ok() && key == *loader && path != kSystemLoader && path != *loader) key = path;
    by_resolved_[key].push_back(path);
  }
  // The map's order is unspecified; checks and messages should not be.
  for (auto& [resolved, paths] : by_resolved_) std::sort(paths.begin(), paths.end());
}

bool PolicyCommandRules::Names(const std::string& exe, std::string* rule_id,
                               std::string* denial) const {
  const std::string quoted = principal_name_.substr(0, 128);
  if (principal_ == nullptr) {
    *denial = absl::StrCat("rule:default_deny: '", quoted,
                           "' is not a user or service account of the policy");
    return false;
  }
  auto it = by_resolved_.find(exe);
  if (it == by_resolved_.end()) {
    *denial = absl::StrCat("rule:default_deny: no grant of '", quoted, "' names executable '",
                           exe, "'");
    return false;
  }
  rule_id->clear();
  for (const std::string& path : it->second) {
    const policy::CommandAccess& access = principal_->commands.at(path);
    if (!access.deny_rule.empty()) {
      *denial = absl::StrCat("rule:", access.deny_rule, ": executable '", path,
                             "' is denied to '", quoted, "'");
      return false;
    }
    if (rule_id->empty() && !access.grants.empty() && !access.grants[0].rules.empty()) {
      *rule_id = access.grants[0].rules[0].rule_id;
    }
  }
  if (rule_id->empty()) {  // only denies name it, and they were handled above
    *denial = absl::StrCat("rule:default_deny: no grant of '", quoted, "' names executable '",
                           exe, "'");
    return false;
  }
  return true;
}

std::string PolicyCommandRules::Check(const std::string& exe,
                                      const std::vector<std::string>& global_flags,
                                      const std::vector<std::string>& args,
                                      absl::string_view cwd,
                                      const ExecutableResolver& resolver,
                                      std::string* rule_id) const {
  std::string denial;
  if (!Names(exe, rule_id, &denial)) return denial;
  rule_id->clear();
  for (const std::string& path : by_resolved_.at(exe)) {
    policy::PolicyRequest request;
    request.principal = principal_name_;
    request.command_cwd = std::string(cwd);
    request.operand_resolver = [&resolver](absl::string_view dir, absl::string_view operand) {
      return resolver.ResolveOperand(dir, operand);
    };
    // git's global options go after the subcommand, where the policy reads flags: each
    // is still checked (forbidden_flags, allowed_flags, max_args), and a value such as
    // -C's directory is an operand for the operand globs.
    std::vector<std::string> argv = {path};
    auto split = args.begin() + (args.empty() ? 0 : 1);
    argv.insert(argv.end(), args.begin(), split);
    argv.insert(argv.end(), global_flags.begin(), global_flags.end());
    argv.insert(argv.end(), split, args.end());
    request.commands.push_back(std::move(argv));
    policy::Decision d = policy::Decide(*snapshot_, request);
    if (d.verdict == policy::Verdict::kDeny) {
      return absl::StrCat("rule:", d.rule_id, ": ", d.message);
    }
    if (rule_id->empty()) *rule_id = d.rule_id;
  }
  return "";
}

void PolicyCommandRules::AppendReadScope(const std::string& exe, ReadScope* scope) const {
  if (principal_ == nullptr) return;
  auto it = by_resolved_.find(exe);
  if (it == by_resolved_.end()) return;
  for (const std::string& path : it->second) {
    for (const policy::CommandGrant& grant : principal_->commands.at(path).grants) {
      std::vector<std::string> any_of;
      bool bounded = !grant.rules.empty();
      for (const policy::CommandRule& rule : grant.rules) {
        bounded = bounded && !rule.operand_globs.empty();
        any_of.insert(any_of.end(), rule.operand_globs.begin(), rule.operand_globs.end());
      }
      if (bounded) scope->all_of.push_back(std::move(any_of));
    }
  }
}

}  // namespace gantry::sandbox
