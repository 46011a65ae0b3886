#include "common/subcommand.h"

#include <cstdio>

namespace gantry {
namespace {

bool IsHelp(const std::string& arg) { return arg == "--help" || arg == "-h" || arg == "help"; }

void PrintOverview(const std::vector<Subcommand>& table, FILE* out) {
  std::fprintf(out,
               "gantry: serve local models to people and coding agents, safely and with "
               "evidence.\n\nUsage: gantry <command> [options]\n       gantry <command> "
               "--help\n\nCommands:\n");
  for (const auto& cmd : table) std::fprintf(out, "  %-10s %s\n", cmd.name, cmd.summary);
}

}  // namespace

int DispatchSubcommand(const std::vector<Subcommand>& table,
                       const std::vector<std::string>& args) {
  if (args.empty()) {
    PrintOverview(table, stderr);
    return 2;
  }
  if (IsHelp(args[0])) {
    if (args.size() > 1) return DispatchSubcommand(table, {args[1], "--help"});
    PrintOverview(table, stdout);
    return 0;
  }
  for (const auto& cmd : table) {
    if (args[0] != cmd.name) continue;
    std::vector<std::string> rest(args.begin() + 1, args.end());
    if (!rest.empty() && IsHelp(rest[0])) {
      std::fputs(cmd.usage, stdout);
      return 0;
    }
    return cmd.run(rest);
  }
  std::fprintf(stderr, "gantry: unknown command '%s' (see gantry --help)\n", args[0].c_str());
  return 2;
}

}  // namespace gantry
