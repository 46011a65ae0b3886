// The `gantry` command line: one binary, subcommands like git or kubectl.
//
// Each capability provides its subcommands as Subcommand values from its own library
// (for example //policy:cli) and cli/gantry_main.cc lists them in one table. A
// subcommand receives the arguments after its name; `gantry <cmd> --help` is answered
// by the dispatcher from `usage`, so every subcommand documents itself the same way.
#ifndef GANTRY_CLI_SUBCOMMAND_H_
#define GANTRY_CLI_SUBCOMMAND_H_

#include <string>
#include <vector>

namespace gantry::cli {

struct Subcommand {
  const char* name;
  // One line for `gantry --help`.
  const char* summary;
  // The full text for `gantry <name> --help`: synopsis, options, exit status.
  const char* usage;
  // Returns the process exit status: 0 success, 1 failure, 2 usage error.
  int (*run)(const std::vector<std::string>& args);
};

// Runs the subcommand named by args[0] from `table`; handles --help/-h/help, unknown
// names and a missing name. Writes to stdout/stderr; returns the exit status.
int Dispatch(const std::vector<Subcommand>& table, const std::vector<std::string>& args);

}  // namespace gantry::cli

#endif  // GANTRY_CLI_SUBCOMMAND_H_
