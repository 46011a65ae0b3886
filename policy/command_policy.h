// Command rules that code builds (tests, the benchmark, a task manifest's own
// executables) as a policy of their own: one service account granted the rules in one
// grant. The text is written out and loaded with LoadPolicyText (policy_loader.h), so
// that such rules are parsed, compiled and decided (policy_decide.h) exactly as
// grants[i].commands of a policy file; there is no second rule format.
//
// Thread-safety: pure functions.
#ifndef GANTRY_POLICY_COMMAND_POLICY_H_
#define GANTRY_POLICY_COMMAND_POLICY_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "policy/policy_types.h"

namespace gantry::policy {

// Policy YAML in which service account `principal` has one grant whose commands are
// `rules`, in order (rule_id is ignored: the loader names rules[i]
// CommandPolicyRuleId(i)); no models, no key anyone holds. An empty `rules` grants no
// executable. Every string is written double-quoted, so any text survives as written.
std::string CommandPolicyText(absl::string_view principal, const std::vector<CommandRule>& rules);

// Loads CommandPolicyText(principal, rules); `source` names it in messages. Errors: the
// loader's INVALID_ARGUMENT (a principal name that is not a name, an executable that is
// not an absolute clean path, a glob that does not parse, a flag that is not -x/--name).
absl::StatusOr<std::shared_ptr<const Snapshot>> LoadCommandPolicy(
    absl::string_view principal, const std::vector<CommandRule>& rules,
    absl::string_view source = "command-rules");

// The rule id the loaded policy gives rules[i]: "grants[0].commands[i]".
std::string CommandPolicyRuleId(size_t i);

}  // namespace gantry::policy

#endif  // GANTRY_POLICY_COMMAND_POLICY_H_
