// Fuzz target: the sandbox's command rules, which read two kinds of outside bytes: the
// rules file (YAML) and the model's argv (tool-call arguments). First byte: 0 = parse
// the rest as a rules file; 1 = decide the rest as an argv (NUL-separated words) under a
// fixed rule set; 2 = split the rest as `sh -c` text. Invariant: never crashes; an
// allowed argv resolves to an executable the rules name.
#include <cstdlib>
#include <string>
#include <vector>

#include "sandbox-svc/command_rules.h"
#include "sandbox-svc/command_rules_yaml.h"

namespace {

constexpr char kRules[] = R"(version: 1
name: fuzz
executables:
  - id: cat
    path: /usr/bin/cat
  - id: env
    path: /usr/bin/env
  - id: sh
    path: /bin/sh
  - id: git-read
    path: /usr/bin/git
    subcommands: [status, log, diff, show]
    denied_flags: [--output, --ext-diff]
)";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gantry::sandbox;
  if (size == 0) return 0;
  static SandboxViewResolver* resolver = new SandboxViewResolver("/tmp");
  static CommandRules* rules = [] {
    auto parsed = ParseCommandRulesYaml(kRules, *resolver);
    if (!parsed.ok()) std::abort();
    return new CommandRules(std::move(*parsed));
  }();
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0:
      (void)ParseCommandRulesYaml(rest, *resolver);
      break;
    case 1: {
      std::vector<std::string> argv;
      size_t start = 0;
      for (size_t i = 0; i <= rest.size(); ++i) {
        if (i == rest.size() || rest[i] == '\0') {
          argv.push_back(rest.substr(start, i - start));
          start = i + 1;
        }
      }
      CommandDecision d = DecideCommand(*rules, argv, "/workspace", *resolver);
      if (d.allowed && d.resolved_executable.empty()) std::abort();
      break;
    }
    default:
      (void)SplitSimpleCommand(rest);
  }
  return 0;
}
