#include "policy/policy_compile.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gantry::policy {
namespace {

void MergeModel(const RawModelGrant& grant, ModelAccess* access) {
  if (access->grant_rule.empty()) access->grant_rule = grant.rule_id;
  for (int i = 0; i < kParamCount; ++i) {
    if (!grant.bounds[i]) continue;
    const GrantBound& bound = *grant.bounds[i];
    ParamRule& rule = access->params[i];
    rule.parts.push_back(bound);
    rule.lo = std::max(rule.lo, bound.min);
    rule.hi = std::min(rule.hi, bound.max);
    rule.mask &= bound.allowed_mask;
  }
}

absl::Status CheckModel(const std::string& source, const Principal& p, const std::string& model,
                        const ModelAccess& access) {
  for (int i = 0; i < kParamCount; ++i) {
    const ParamRule& rule = access.params[i];
    if (rule.parts.empty() || (rule.lo <= rule.hi && rule.mask != 0)) continue;
    std::string rules;
    for (const GrantBound& part : rule.parts) absl::StrAppend(&rules, rules.empty() ? "" : ", ", part.rule_id);
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": the grants of '", p.name, "' on model '", model, "' bound ",
        ParamName(static_cast<Param>(i)), " with ranges that do not overlap (", rules,
        "): no request could use it; narrow or remove one of them"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<Snapshot>> CompilePolicy(RawPolicy raw, std::string sha256,
                                                        std::string source) {
  auto snap = std::make_shared<Snapshot>();
  snap->sha256 = std::move(sha256);
  snap->source = std::move(source);
  snap->defaults = raw.defaults;
  snap->advertised_tools = raw.advertised_tools;
  snap->groups = raw.groups;
  for (const ModelInfo& model : raw.models) snap->models[model.name] = model;

  // Grants by subject, in file order. Users and service accounts share one namespace.
  absl::flat_hash_map<std::string, std::vector<int>> by_subject;
  for (int g = 0; g < static_cast<int>(raw.grants.size()); ++g) {
    const RawGrant& grant = raw.grants[g];
    by_subject[absl::StrCat(grant.to_group ? "g:" : "p:", grant.subject)].push_back(g);
  }

  for (const RawPrincipal& rp : raw.principals) {
    Principal p;
    p.name = rp.name;
    p.kind = rp.kind;
    p.priority = rp.priority;
    p.special_tokens_in_content = rp.special_tokens_in_content;
    p.key_sha256 = rp.key_sha256;
    p.groups = rp.groups;
    p.budgets = raw.defaults;

    std::vector<int> indices;
    auto add = [&](const std::string& key) {
      auto it = by_subject.find(key);
      if (it != by_subject.end()) indices.insert(indices.end(), it->second.begin(), it->second.end());
    };
    add("p:" + rp.name);
    for (const std::string& group : rp.groups) add("g:" + group);
    std::sort(indices.begin(), indices.end());
    indices.erase(std::unique(indices.begin(), indices.end()), indices.end());

    for (int g : indices) {
      const RawGrant& grant = raw.grants[g];
      for (const RawModelGrant& model : grant.models) MergeModel(model, &p.models[model.model]);
      for (const auto& [name, tool] : grant.tools) p.tools[name].grants.push_back(tool);
      // One grant's rules for one executable are alternatives; collect them first.
      std::vector<std::pair<std::string, CommandGrant>> per_exe;
      for (const CommandRule& rule : grant.commands) {
        auto it = std::find_if(per_exe.begin(), per_exe.end(),
                               [&](const auto& e) { return e.first == rule.executable; });
        if (it == per_exe.end()) {
          per_exe.emplace_back(rule.executable, CommandGrant{});
          it = per_exe.end() - 1;
        }
        it->second.rules.push_back(rule);
      }
      for (auto& [exe, cmd] : per_exe) p.commands[exe].grants.push_back(std::move(cmd));
      for (const auto& [name, rule] : grant.deny_models) {
        if (p.models[name].deny_rule.empty()) p.models[name].deny_rule = rule;
      }
      for (const auto& [name, rule] : grant.deny_tools) {
        if (p.tools[name].deny_rule.empty()) p.tools[name].deny_rule = rule;
      }
      for (const auto& [name, rule] : grant.deny_commands) {
        if (p.commands[name].deny_rule.empty()) p.commands[name].deny_rule = rule;
      }
      auto narrow = [](int64_t* field, const std::optional<int64_t>& v) {
        if (v && *v < *field) *field = *v;
      };
      narrow(&p.budgets.tokens_per_day, grant.tokens_per_day);
      narrow(&p.budgets.tokens_per_month, grant.tokens_per_month);
      narrow(&p.budgets.requests_per_minute, grant.requests_per_minute);
      narrow(&p.budgets.concurrent_requests, grant.concurrent_requests);
      narrow(&p.budgets.request_seconds, grant.request_seconds);
    }
    for (const auto& [model, access] : p.models) {
      absl::Status s = CheckModel(snap->source, p, model, access);
      if (!s.ok()) return s;
    }
    int index = static_cast<int>(snap->principals.size());
    snap->by_name[p.name] = index;
    snap->by_key_sha256[p.key_sha256] = index;
    snap->principals.push_back(std::move(p));
  }
  snap->examples = std::move(raw.examples);
  return snap;
}

}  // namespace gantry::policy
