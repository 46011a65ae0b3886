// `gantry policy`: check, explain and hash an access-policy file (docs/policy.md).
//
//   gantry policy check FILE
//   gantry policy hash FILE
//   gantry policy explain FILE (--key K | --user U) [--model M] [--param NAME=VALUE ...]
//                         [--tool NAME [--args JSON] ...] [--command "ARGV..." ...]
//
// Exit status: 0 success (for explain: a decision was printed, whatever its verdict),
// 1 the policy did not load, 2 usage error.
#ifndef GANTRY_POLICY_POLICY_COMMANDS_H_
#define GANTRY_POLICY_POLICY_COMMANDS_H_

#include "common/subcommand.h"

namespace gantry::policy {

extern const Subcommand kPolicyCommand;

}  // namespace gantry::policy

#endif  // GANTRY_POLICY_POLICY_COMMANDS_H_
