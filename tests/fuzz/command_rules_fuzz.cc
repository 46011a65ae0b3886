// Fuzz target: the sandbox's command rules, which read the model's argv (tool-call
// arguments) and `sh -c` text. First byte: 0 = decide the rest as an argv
// (NUL-separated words) under a principal's rules from an access policy; 1 = the same
// under command rules built in code (policy/command_policy.h, the form tests and the
// harness use); 2 = split the rest as `sh -c` text. Invariant: never
// crashes; an allowed argv resolves to an executable. (The policy file itself has its
// own target, policy_loader.)
#include <cstdlib>
#include <string>
#include <vector>

#include "policy/command_policy.h"
#include "policy/policy_loader.h"
#include "sandbox-svc/command_rules.h"
#include "sandbox-svc/policy_command_rules.h"

namespace {

constexpr char kPolicy[] = R"(version: 1
defaults:
  budgets: {tokens_per_day: 1, tokens_per_month: 1, requests_per_minute: 1, concurrent_requests: 1}
models: []
principals:
  users:
    - {name: fuzz, key_sha256: 0000000000000000000000000000000000000000000000000000000000000001, priority: batch}
grants:
  - user: fuzz
    commands:
      - {executable: /usr/bin/cat, operands: {globs: ["/workspace/**"]}}
      - {executable: /usr/bin/env}
      - {executable: /bin/sh}
      - {executable: /usr/bin/git, subcommands: [status, log, diff, show], forbidden_flags: [--output, --ext-diff]}
    deny:
      commands: [/usr/bin/rm]
)";

std::vector<std::string> Words(const std::string& rest) {
  std::vector<std::string> argv;
  size_t start = 0;
  for (size_t i = 0; i <= rest.size(); ++i) {
    if (i == rest.size() || rest[i] == '\0') {
      argv.push_back(rest.substr(start, i - start));
      start = i + 1;
    }
  }
  return argv;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gantry::sandbox;
  if (size == 0) return 0;
  static SandboxViewResolver* resolver = new SandboxViewResolver("/tmp");
  static PolicyCommandRules* from_policy = [] {
    auto loaded = gantry::policy::LoadPolicyText(kPolicy, "fuzz.yaml");
    if (!loaded.ok()) std::abort();
    return new PolicyCommandRules(*loaded, "fuzz", *resolver);
  }();
  static PolicyCommandRules* built = [] {
    std::vector<gantry::policy::CommandRule> rules;
    for (const char* exe : {"cat", "env", "sh", "git"}) {
      auto path = resolver->Resolve(exe, "/");
      if (!path.ok()) continue;
      rules.emplace_back();
      rules.back().executable = *path;
      rules.back().forbidden_flags = {"--output"};
    }
    auto loaded = gantry::policy::LoadCommandPolicy("fuzz", rules);
    if (!loaded.ok()) std::abort();
    return new PolicyCommandRules(*loaded, "fuzz", *resolver);
  }();
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0:
    case 1: {
      CommandDecision d =
          data[0] % 3 == 0 ? DecideCommand(*from_policy, Words(rest), "/workspace", *resolver)
                           : DecideCommand(*built, Words(rest), "/workspace", *resolver);
      if (d.allowed && d.resolved_executable.empty()) std::abort();
      break;
    }
    default:
      (void)SplitSimpleCommand(rest);
  }
  return 0;
}
