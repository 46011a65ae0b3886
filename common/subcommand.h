// The `gantry` command line: one binary, subcommands like git or kubectl.
//
// Each capability provides its subcommands as Subcommand values from its own library
// (for example //policy:cli) and cli/gantry_main.cc lists them in one table. The
// interface lives in common/ so that every component can expose its commands without
// including cli/: components point down to it, and only cli/ assembles the table. A
// subcommand receives the arguments after its name; `gantry <cmd> --help` is answered
// by the dispatcher from `usage`, so every subcommand documents itself the same way.
#ifndef GANTRY_COMMON_SUBCOMMAND_H_
#define GANTRY_COMMON_SUBCOMMAND_H_

#include <string>
#include <vector>

namespace gantry {

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
int DispatchSubcommand(const std::vector<Subcommand>& table,
                       const std::vector<std::string>& args);

}  // namespace gantry

#endif  // GANTRY_COMMON_SUBCOMMAND_H_
