// Subcommands that belong to no single service: version, errors.
#ifndef GANTRY_CLI_BUILTIN_COMMANDS_H_
#define GANTRY_CLI_BUILTIN_COMMANDS_H_

#include "common/subcommand.h"

namespace gantry::cli {

extern const Subcommand kVersionCommand;
extern const Subcommand kErrorsCommand;

}  // namespace gantry::cli

#endif  // GANTRY_CLI_BUILTIN_COMMANDS_H_
