// `gantry sandbox exec`: runs one command through exactly the isolation path of the
// service (Sandbox::Run with an exec ToolCall) and prints its output, exit status and,
// for a denial, the reason. See common/subcommand.h.
#ifndef GANTRY_SANDBOX_SVC_SANDBOX_COMMANDS_H_
#define GANTRY_SANDBOX_SVC_SANDBOX_COMMANDS_H_

#include "common/subcommand.h"

namespace gantry::sandbox {

extern const Subcommand kSandboxCommand;

}  // namespace gantry::sandbox

#endif  // GANTRY_SANDBOX_SVC_SANDBOX_COMMANDS_H_
