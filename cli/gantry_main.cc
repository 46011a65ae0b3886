// gantry: the one command line of the project. See cli/subcommand.h.
#include <string>
#include <vector>

#include "cli/builtin_commands.h"
#include "cli/subcommand.h"
#include "ledger/ledger_commands.h"

int main(int argc, char** argv) {
  using gantry::cli::Subcommand;
  // Each capability adds its row here as it lands (tokenize, render, bundle, generate,
  // policy, sandbox, ledger, task, up).
  const std::vector<Subcommand> table = {
      gantry::cli::kVersionCommand,
      gantry::cli::kErrorsCommand,
      gantry::ledger::kLedgerCommand,
  };
  return gantry::cli::Dispatch(table, std::vector<std::string>(argv + 1, argv + argc));
}
