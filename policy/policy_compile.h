// Internal to //policy: the policy as read from YAML (one entry per grant, in file
// order) and its compilation into per-principal effective grants.
//
// The combination rule (docs/policy.md, "How grants combine"), applied to the grants
// whose subject is the principal itself or one of its groups:
//   - what is granted (models, tools, executables) is the union;
//   - how (parameter bounds, argument constraints, command rules) is the conjunction:
//     a request must satisfy every one of those grants that names the same model, tool
//     or executable; clamping goes into the intersection of their ranges;
//   - an explicit deny in any of them wins over every grant;
//   - budgets are the minimum of the policy defaults and every grant that sets one
//     (unlimited is kUnlimited, above every number, so unlimited and N give N, and a
//     grant's 0 gives 0).
// A grant therefore only ever affects its own subject (and a group's members), and
// adding a group membership can only add names or narrow what is already granted.
//
// Thread-safety: pure functions.
#ifndef GANTRY_POLICY_POLICY_COMPILE_H_
#define GANTRY_POLICY_POLICY_COMPILE_H_

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "policy/policy_types.h"

namespace gantry::policy {

struct RawModelGrant {
  std::string model;
  std::string rule_id;  // "grants[1].models.qwen3-8b"
  std::array<std::optional<GrantBound>, kParamCount> bounds;
};

struct RawGrant {
  std::string id;     // "grants[1]"
  std::string where;  // "policy.yaml:40:3", for compile errors
  bool to_group = false;
  std::string subject;  // user / service account name, or group name
  std::vector<RawModelGrant> models;
  std::vector<std::pair<std::string, ToolGrant>> tools;
  std::vector<CommandRule> commands;
  std::optional<int64_t> tokens_per_day, tokens_per_month, requests_per_minute,
      concurrent_requests, request_seconds;
  // (name, rule id) pairs; commands are executable paths.
  std::vector<std::pair<std::string, std::string>> deny_models, deny_tools, deny_commands;
};

struct RawPrincipal {
  std::string name;
  PrincipalKind kind = PrincipalKind::kUser;
  Priority priority = Priority::kInteractive;
  std::string key_sha256;
  std::vector<std::string> groups;
  bool special_tokens_in_content = false;
};

struct RawPolicy {
  Budgets defaults;
  AdvertisedTools advertised_tools = AdvertisedTools::kStrip;
  std::vector<ModelInfo> models;
  std::vector<std::string> groups;
  std::vector<RawPrincipal> principals;
  std::vector<RawGrant> grants;
  std::vector<Example> examples;
};

// Builds the snapshot. Errors: INVALID_ARGUMENT when, for some principal, the grants
// naming one model set bounds on one parameter that do not overlap (no value could ever
// be allowed, which is a mistake worth stopping on).
absl::StatusOr<std::shared_ptr<Snapshot>> CompilePolicy(RawPolicy raw, std::string sha256,
                                                        std::string source);

}  // namespace gantry::policy

#endif  // GANTRY_POLICY_POLICY_COMPILE_H_
