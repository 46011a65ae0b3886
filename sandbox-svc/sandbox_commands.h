// `gantry sandbox exec`: runs one command through exactly the isolation path of the
// service (Sandbox::Run with an exec ToolCall) and prints its output, exit status and,
// for a denial, the reason. See cli/subcommand.h.
#ifndef GANTRY_SANDBOX_SVC_SANDBOX_COMMANDS_H_
#define GANTRY_SANDBOX_SVC_SANDBOX_COMMANDS_H_

#include "cli/subcommand.h"

namespace gantry::sandbox {

extern const cli::Subcommand kSandboxCommand;

}  // namespace gantry::sandbox

#endif  // GANTRY_SANDBOX_SVC_SANDBOX_COMMANDS_H_
