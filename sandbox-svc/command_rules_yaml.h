// Loads a CommandRules set from YAML (`gantry sandbox exec --rules FILE`,
// `gantry-sandbox --rules FILE`). Format (docs/sandbox.md, "Command rules"):
//
//   version: 1
//   name: default              # the ToolGrant.exec_rules value that selects this set
//   executables:
//     - id: git-read           # quoted in denials as "rule:git-read: ..."
//       path: /usr/bin/git     # resolved inside the sandbox view when loaded
//       subcommands: [status, log, diff, show]
//       denied_flags: [--output, --ext-diff]
//       arg_patterns: ["*"]
//       allowed_flags: [-n, --stat]   # optional: only these flags
//       max_args: 20                  # optional
//
// Unknown keys are errors (a typo must not silently widen or narrow a rule).
// Thread-safety: thread-safe.
#ifndef GANTRY_SANDBOX_SVC_COMMAND_RULES_YAML_H_
#define GANTRY_SANDBOX_SVC_COMMAND_RULES_YAML_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sandbox-svc/command_rules.h"
#include "sandbox-svc/executable_resolver.h"

namespace gantry::sandbox {

// Parses `text`; each rule's path is resolved with `resolver` (a path that does not
// resolve is kept as written: it then matches nothing).
// Errors: INVALID_ARGUMENT with reason "invalid_rules" and what is wrong (YAML syntax,
// wrong types, unknown keys, a relative path, a duplicate or empty id, version != 1).
absl::StatusOr<CommandRules> ParseCommandRulesYaml(absl::string_view text,
                                                   const SandboxViewResolver& resolver);

// Reads and parses a file. Errors: as above, or NOT_FOUND when it cannot be read.
absl::StatusOr<CommandRules> LoadCommandRulesFile(const std::string& path);

}  // namespace gantry::sandbox

#endif  // GANTRY_SANDBOX_SVC_COMMAND_RULES_YAML_H_
