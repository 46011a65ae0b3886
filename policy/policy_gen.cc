#include "policy/policy_gen.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "common/sha256.h"

namespace gantry::policy {
namespace {

const char* const kTools[] = {"read_file", "write_file", "list_dir", "search"};
const char* const kGlobs[] = {"\"/workspace/**\"", "\"/workspace/src/**\"", "\"/tmp/*\"", "\"/**\""};
const char* const kExes[] = {"/usr/bin/git", "/usr/bin/ls", "/usr/bin/cat"};
const char* const kSubcommands[] = {"status", "diff", "log", "show", "push"};
const char* const kPaths[] = {"/workspace/a", "/workspace/src/b.cc", "/tmp/x", "/etc/passwd",
                              "/workspace/../etc/passwd", "relative/p"};
// Offered tools and the names a model calls: the granted names, a confusable of one
// (Read_File), one no grant names, and (called only: the HTTP parser refuses it as an
// offered name) a Cyrillic look-alike.
const char* const kOffered[] = {"read_file", "write_file", "list_dir", "search", "Read_File", "run_shell"};
const char* const kCalled[] = {"read_file", "read_file", "write_file", "list_dir", "search",
                               "Read_File", "read_f\xd1\x96le"};
const char* const kBadArguments[] = {
    R"({"path":"/workspace/a","path":"/etc/passwd"})",  // a repeated key
    R"(["/workspace/a"])",                             // not an object
    R"("/workspace/a")",
    R"({"path":["/workspace/a"]})",                    // not a string
    R"({"path":7})",
    R"({})",                                           // no path
    R"({"path":"/workspace/a")",                       // not JSON
    R"({"path":"/workspace/src/b.cc","recursive":true})",  // another argument
};

int Pick(std::mt19937_64& rng, int n) { return static_cast<int>(rng() % n); }
bool Coin(std::mt19937_64& rng, int percent) { return Pick(rng, 100) < percent; }
double Uniform(std::mt19937_64& rng, double lo, double hi) {
  return lo + (hi - lo) * (static_cast<double>(rng() % 1000000) / 1000000.0);
}
// A multiple of 0.1 from lo to hi (themselves multiples of 0.1), as the nearest double.
double OnGrid(std::mt19937_64& rng, double lo, double hi) {
  const long first = std::lround(lo * 10);
  return static_cast<double>(first + Pick(rng, static_cast<int>(std::lround(hi * 10) - first) + 1)) / 10;
}
// Served policies and requests keep real numbers on the grid, where a request's value
// often equals a bound.
double Real(std::mt19937_64& rng, double lo, double hi, bool served) {
  return served ? OnGrid(rng, lo, hi) : Uniform(rng, lo, hi);
}
const char* Action(std::mt19937_64& rng) { return Coin(rng, 50) ? "reject" : "clamp"; }
// A budget value as written: sometimes 0 (admits nothing) or `unlimited`, else a number
// from lo to lo + span - 1 (served: `unlimited`).
std::string RandomBudget(std::mt19937_64& rng, int lo, int span, bool served) {
  const int roll = Pick(rng, 10);
  if (roll == 0) return "0";
  if (roll == 1 || served) return "unlimited";
  return absl::StrCat(lo + Pick(rng, span));
}

// Bounds always contain the core ranges: max_tokens [500, 1000], temperature [0.5, 1.0],
// top_p [0.1, 0.5], top_k [10, 20], seed [0, 1000], stop_strings [0, 1].
std::string RandomBounds(std::mt19937_64& rng, bool served) {
  // Served: often no bounds, and clamps more often than rejects, so that more requests
  // get past the parameters to the tools.
  if (served && Coin(rng, 40)) return "{}";
  auto action = [&] { return served ? (Coin(rng, 30) ? "reject" : "clamp") : Action(rng); };
  std::string out;
  auto add = [&](const std::string& text) { absl::StrAppend(&out, out.empty() ? "" : ", ", text); };
  if (Coin(rng, 50)) add(absl::StrCat("max_tokens: {max: ", 1000 + Pick(rng, 8000), ", action: ", action(), "}"));
  if (Coin(rng, 40)) {
    add(absl::StrCat("temperature: {min: ", Real(rng, 0, 0.5, served), ", max: ",
                     Real(rng, 1.0, 2.0, served), ", action: ", action(), "}"));
  }
  if (Coin(rng, 30)) {
    add(absl::StrCat("top_p: {min: ", Real(rng, 0, 0.1, served), ", max: ", Real(rng, 0.5, 1, served),
                     ", action: ", action(), "}"));
  }
  if (Coin(rng, 30)) add(absl::StrCat("top_k: {min: ", 1 + Pick(rng, 10), ", max: ", 20 + Pick(rng, 80), ", action: ", action(), "}"));
  if (Coin(rng, 20)) add(absl::StrCat("seed: {max: ", 1000 + Pick(rng, 100000), ", action: ", action(), "}"));
  if (Coin(rng, 20)) add(absl::StrCat("stop_strings: {max: ", 1 + Pick(rng, 4), ", action: ", action(), "}"));
  if (Coin(rng, 20)) add(Coin(rng, 50) ? "tool_choice: {allowed: [auto, none]}" : "tool_choice: {allowed: [auto, required, named]}");
  if (Coin(rng, 20)) add(absl::StrCat("parallel_tool_calls: {allowed: ", Coin(rng, 50) ? "true" : "false", ", action: ", action(), "}"));
  if (Coin(rng, 20)) add(absl::StrCat("reasoning_effort: {max: ", Coin(rng, 50) ? "medium" : "high", ", action: ", action(), "}"));
  if (served && Coin(rng, 25)) {
    add(absl::StrCat("enable_thinking: {allowed: ", Coin(rng, 50) ? "true" : "false", ", action: ",
                     action(), "}"));
  }
  return "{" + out + "}";
}

}  // namespace

std::string GeneratedPolicy::Render() const {
  std::string out = head;
  if (grants.empty()) return out + "grants: []\n";
  out += "grants:\n";
  for (const std::string& g : grants) out += g;
  return out;
}

GeneratedPolicy GeneratePolicy(int users, int groups, int grants, std::mt19937_64& rng,
                               int deny_percent) {
  PolicyGenOptions options;
  options.deny_percent = deny_percent;
  return GeneratePolicy(users, groups, grants, rng, options);
}

GeneratedPolicy GeneratePolicy(int users, int groups, int grants, std::mt19937_64& rng,
                               const PolicyGenOptions& options) {
  GeneratedPolicy p;
  p.models = {"m0", "m1", "m2"};
  p.served = options.served;
  std::string defaults;
  if (options.served) {
    defaults = "  budgets: {tokens_per_day: unlimited, tokens_per_month: unlimited, "
               "requests_per_minute: unlimited, concurrent_requests: unlimited}\n";
    const int mode = Pick(rng, 3);
    if (mode > 0) absl::StrAppend(&defaults, "  advertised_tools: ", mode == 1 ? "strip" : "reject", "\n");
  } else {
    // Some defaults without a day or rate limit, which grants then narrow (or not).
    const char* day = Coin(rng, 20) ? "unlimited" : "100000";
    const char* rate = Coin(rng, 20) ? "unlimited" : "60";
    defaults = absl::StrCat("  budgets: {tokens_per_day: ", day,
                            ", tokens_per_month: 1000000, requests_per_minute: ", rate,
                            ", concurrent_requests: 4}\n");
  }
  p.head = absl::StrCat(
      "version: 1\n"
      "defaults:\n", defaults,
      "models:\n"
      "  - {name: m0, bundles: [b0]}\n"
      "  - {name: m1, bundles: [b1]}\n"
      "  - {name: m2, bundles: [b2]}\n"
      "principals:\n");
  if (groups > 0) p.head += "  groups:\n";
  for (int g = 0; g < groups; ++g) {
    p.groups.push_back(absl::StrCat("g", g));
    absl::StrAppend(&p.head, "    - {name: g", g, "}\n");
  }
  p.head += "  users:\n";
  const char* priorities[] = {"interactive", "accessibility", "batch"};
  for (int u = 0; u < users; ++u) {
    std::string name = absl::StrCat("u", u);
    std::vector<std::string> member_of;
    for (const std::string& g : p.groups) {
      if (Coin(rng, 30)) member_of.push_back(g);
    }
    std::string list;
    for (const std::string& g : member_of) absl::StrAppend(&list, list.empty() ? "" : ", ", g);
    absl::StrAppend(&p.head, "    - {name: ", name, ", key_sha256: ", Sha256Hex("key-" + name),
                    ", priority: ", priorities[Pick(rng, 3)], ", groups: [", list, "]}\n");
    p.users.push_back(name);
    p.user_groups.push_back(member_of);
  }
  for (int i = 0; i < grants; ++i) {
    std::string subject = (!p.groups.empty() && Coin(rng, 50))
                              ? "group: " + p.groups[Pick(rng, p.groups.size())]
                              : "user: " + p.users[Pick(rng, p.users.size())];
    p.grants.push_back(RandomGrant(p, subject, rng, options.deny_percent));
  }
  return p;
}

std::string RandomGrant(const GeneratedPolicy& policy, const std::string& subject_line,
                        std::mt19937_64& rng, int deny_percent) {
  std::string g = absl::StrCat("  - ", subject_line, "\n");
  std::string models;
  for (const std::string& m : policy.models) {
    if (Coin(rng, 50)) absl::StrAppend(&models, "      ", m, ": ", RandomBounds(rng, policy.served), "\n");
  }
  if (!models.empty()) absl::StrAppend(&g, "    models:\n", models);
  std::string tools;
  for (const char* t : kTools) {
    if (!Coin(rng, 40)) continue;
    if (Coin(rng, 50)) {
      absl::StrAppend(&tools, "      ", t, ": {}\n");
    } else {
      absl::StrAppend(&tools, "      ", t, ": {args: {path: {globs: [", kGlobs[Pick(rng, 4)], "]}}}\n");
    }
  }
  if (!tools.empty()) absl::StrAppend(&g, "    tools:\n", tools);
  std::string commands;
  for (const char* exe : kExes) {
    if (!Coin(rng, 40)) continue;
    absl::StrAppend(&commands, "      - {executable: ", exe);
    if (std::string(exe) == "/usr/bin/git") {
      absl::StrAppend(&commands, ", subcommands: [", kSubcommands[Pick(rng, 3)], ", ",
                      kSubcommands[3 + Pick(rng, 2)], "], forbidden_flags: [--output]");
    } else if (Coin(rng, 70)) {
      absl::StrAppend(&commands, ", operands: {globs: [", kGlobs[Pick(rng, 4)], "]}");
    }
    absl::StrAppend(&commands, "}\n");
  }
  if (!commands.empty()) absl::StrAppend(&g, "    commands:\n", commands);
  if (Coin(rng, policy.served ? 10 : 30)) {
    absl::StrAppend(&g, "    budgets: {tokens_per_day: ", RandomBudget(rng, 1000, 200000, policy.served),
                    ", concurrent_requests: ", RandomBudget(rng, 1, 8, policy.served), "}\n");
  }
  if (Coin(rng, deny_percent)) {
    absl::StrAppend(&g, "    deny: {models: [", policy.models[Pick(rng, 3)], "], tools: [",
                    kTools[Pick(rng, 4)], "], commands: [", kExes[Pick(rng, 3)], "]}\n");
  }
  if (g.find('\n') == g.size() - 1) {
    absl::StrAppend(&g, "    budgets: {requests_per_minute: ", policy.served ? "unlimited" : "50", "}\n");
  }
  return g;
}

PolicyRequest RandomRequest(const GeneratedPolicy& policy, bool by_key, std::mt19937_64& rng) {
  PolicyRequest r;
  const std::string& user = policy.users[Pick(rng, policy.users.size())];
  if (by_key) {
    r.api_key = "key-" + user;
  } else {
    r.principal = user;
  }
  r.model = Coin(rng, 5) ? "m9" : policy.models[Pick(rng, 3)];
  if (Coin(rng, 60)) r.params.Set(Param::kMaxTokens, Pick(rng, 12000));
  if (Coin(rng, 50)) r.params.Set(Param::kTemperature, Uniform(rng, 0, 2.5));
  if (Coin(rng, 30)) r.params.Set(Param::kTopP, Uniform(rng, 0, 1));
  if (Coin(rng, 30)) r.params.Set(Param::kTopK, Pick(rng, 150));
  if (Coin(rng, 20)) r.params.Set(Param::kSeed, Pick(rng, 200000));
  if (Coin(rng, 20)) r.params.Set(Param::kStopStrings, Pick(rng, 6));
  if (Coin(rng, 20)) r.params.Set(Param::kToolChoice, Pick(rng, 4));
  if (Coin(rng, 20)) r.params.Set(Param::kParallelToolCalls, Pick(rng, 2));
  if (Coin(rng, 20)) r.params.Set(Param::kReasoningEffort, 1 + Pick(rng, 3));
  if (Coin(rng, 30)) r.tools.push_back({kTools[Pick(rng, 4)], {{"path", kPaths[Pick(rng, 6)]}}});
  if (Coin(rng, 30)) {
    int e = Pick(rng, 3);
    std::vector<std::string> argv = {kExes[e]};
    if (e == 0) argv.push_back(kSubcommands[Pick(rng, 5)]);
    if (Coin(rng, 30)) argv.push_back("--output=/tmp/x");
    argv.push_back(kPaths[Pick(rng, 6)]);
    r.commands.push_back(std::move(argv));
  }
  return r;
}

ServedRequest RandomServedRequest(const GeneratedPolicy& policy, std::mt19937_64& rng) {
  ServedRequest s;
  PolicyRequest& r = s.request;
  r.api_key = Coin(rng, 4) ? "key-nobody" : "key-" + policy.users[Pick(rng, policy.users.size())];
  r.model = Coin(rng, 5) ? "m9" : policy.models[Pick(rng, 3)];
  if (Coin(rng, 60)) r.params.Set(Param::kMaxTokens, 1 + Pick(rng, 12000));
  if (Coin(rng, 50)) r.params.Set(Param::kTemperature, OnGrid(rng, 0, 2));
  if (Coin(rng, 30)) r.params.Set(Param::kTopP, OnGrid(rng, 0, 1));
  if (Coin(rng, 30)) r.params.Set(Param::kTopK, Pick(rng, 150));  // 0: off
  if (Coin(rng, 20)) r.params.Set(Param::kSeed, Pick(rng, 200000));
  if (Coin(rng, 20)) r.params.Set(Param::kStopStrings, Pick(rng, 6));
  if (Coin(rng, 20)) r.params.Set(Param::kParallelToolCalls, Pick(rng, 2));
  if (Coin(rng, 20)) r.params.Set(Param::kReasoningEffort, 1 + Pick(rng, 3));
  if (Coin(rng, 15)) r.params.Set(Param::kEnableThinking, Pick(rng, 2));
  if (Coin(rng, 5)) r.template_kwargs.push_back("custom_flag");
  if (Coin(rng, 75)) {
    std::vector<std::string> names(std::begin(kOffered), std::end(kOffered));
    std::shuffle(names.begin(), names.end(), rng);
    for (const std::string& name : names) {
      if (Coin(rng, 35)) r.offered_tools.push_back(name);
    }
  }
  if (!r.offered_tools.empty() && Coin(rng, 50)) {
    const int choice = Pick(rng, 4);
    r.params.Set(Param::kToolChoice, choice);
    if (choice == static_cast<int>(ToolChoice::kNamed)) {
      r.tool_choice_name = r.offered_tools[Pick(rng, r.offered_tools.size())];
    }
  }
  const int calls = Coin(rng, 60) ? (Coin(rng, 75) ? 1 : 2) : 0;
  for (int i = 0; i < calls; ++i) {
    // Mostly a tool the request offers (a worker refuses any other call), sometimes
    // any name, as a rogue worker might send it.
    ModelToolCall call{!r.offered_tools.empty() && Coin(rng, 85)
                           ? r.offered_tools[Pick(rng, r.offered_tools.size())]
                           : kCalled[Pick(rng, std::size(kCalled))],
                       ""};
    call.arguments_json = Coin(rng, 80)
                              ? absl::StrCat(R"({"path":")", kPaths[Pick(rng, 6)], R"("})")
                              : kBadArguments[Pick(rng, std::size(kBadArguments))];
    s.model_calls.push_back(std::move(call));
  }
  return s;
}

}  // namespace gantry::policy
