// Policy decisions: who may use which model, with which parameters, tools and commands.
//
// Decide() is a pure function of a compiled Snapshot (policy_types.h) and a request. It
// never fails: every outcome, including an unknown key or a malformed request, is a
// Decision with a verdict, the id of the rule that decided, a stable reason and the
// snapshot's hash. The order in which checks run, and so which rule is reported when
// several would deny, is specified in docs/policy.md, "Decision order":
//
//   principal -> model -> parameters (in Param order) -> offered tools -> tool calls
//   -> commands
//
// Deny by default: a model, tool or executable that no grant of the principal names is
// denied with rule "default_deny"; an explicit deny in any of the principal's grants
// always wins over any grant.
//
// Thread-safety: Decide() only reads the snapshot; call it from any number of threads.
#ifndef GANTRY_POLICY_POLICY_DECIDE_H_
#define GANTRY_POLICY_POLICY_DECIDE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "policy/policy_types.h"

namespace gantry::v1 {
class PolicyDecision;
}  // namespace gantry::v1

namespace gantry::policy {

// The decision for `request` under `snapshot`. When the verdict is kClamp,
// `effective` holds the parameters to use and `clamps` what was changed.
Decision Decide(const Snapshot& snapshot, const PolicyRequest& request);

// Why `rule` rejects `argv` (run in working directory `cwd`, see
// PolicyRequest::command_cwd; "" = operands as written), or "" when it accepts it.
// With `operands` (PolicyRequest::operand_resolver, not empty), an operand's real
// path must match the globs as well as its lexical path. Precondition: argv is non-empty.
std::string CommandRuleMismatch(const CommandRule& rule, const std::vector<std::string>& argv,
                                absl::string_view cwd = "",
                                const OperandResolver* operands = nullptr);

// Adds one chat_template_kwargs member (its value as JSON text) as Decide() reads it:
// enable_thinking becomes that parameter (the value must be true or false: else
// INVALID_ARGUMENT), every other key goes to template_kwargs (kept sorted), which
// Decide() refuses. The router and `gantry policy explain --template-kwarg` both call it.
absl::Status AddTemplateKwarg(PolicyRequest* request, absl::string_view key,
                              absl::string_view value_json);

// Completes `request` as a served request always is: `defaults` becomes
// ServingDefaults(default_max_tokens); with tools offered and no tool_choice,
// tool_choice is auto; without tools offered, it has none. The router, `gantry policy explain` and the
// policy's examples all call it, so that the three decide the same request alike.
void CompleteAsServed(PolicyRequest* request, uint32_t default_max_tokens);

// The wire form (gantry.v1.PolicyDecision), as recorded in the ledger.
void ToProto(const Decision& decision, v1::PolicyDecision* out);

// The tool call `name` with arguments `arguments_json` (the JSON text of a model's
// call, or of `gantry policy explain --args`) as Decide() reads it: top-level members
// become `args`; arguments that are not valid JSON, not an object, or repeat a key
// (anywhere: JSON parsers disagree on which copy wins) make it `malformed`, which
// Decide() denies with tool_arguments_not_allowed. The router and explain both build
// calls with this function, so that they decide the same call.
ToolCallRequest ToolCallFromJson(std::string name, absl::string_view arguments_json);

// Whether some grant of `principal` names `model` and no deny does (parameters aside):
// what model lists show a principal. False for an unknown principal.
bool ModelGranted(const Snapshot& snapshot, const std::string& principal,
                  const std::string& model);

}  // namespace gantry::policy

#endif  // GANTRY_POLICY_POLICY_DECIDE_H_
