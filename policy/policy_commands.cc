#include "policy/policy_commands.h"

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "policy/policy_decide.h"
#include "policy/policy_loader.h"

namespace gantry::policy {
namespace {

int Usage(const char* message) {
  std::fprintf(stderr, "gantry policy: %s (see gantry policy --help)\n", message);
  return 2;
}

// Splits "ARGV..." on blanks; single and double quotes group words (no escapes).
bool SplitArgv(const std::string& text, std::vector<std::string>* argv) {
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (char c : text) {
    if (quote != 0) {
      if (c == quote) {
        quote = 0;
      } else {
        word.push_back(c);
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == ' ' || c == '\t') {
      if (in_word) argv->push_back(std::move(word));
      word.clear();
      in_word = false;
    } else {
      word.push_back(c);
      in_word = true;
    }
  }
  if (quote != 0) return false;
  if (in_word) argv->push_back(std::move(word));
  return !argv->empty();
}

std::shared_ptr<const Snapshot> LoadOrReport(const std::string& path) {
  auto snap = LoadPolicyFile(path);
  if (!snap.ok()) {
    std::fprintf(stderr, "%s\n", std::string(snap.status().message()).c_str());
    return nullptr;
  }
  return *std::move(snap);
}

int RunCheck(const std::vector<std::string>& args) {
  if (args.size() != 1) return Usage("check takes exactly one FILE");
  std::shared_ptr<const Snapshot> snap = LoadOrReport(args[0]);
  if (snap == nullptr) return 1;
  std::printf("%s: ok: %zu principals, %zu groups, %zu models, %zu examples hold\n"
              "policy_sha256 %s\n",
              snap->source.c_str(), snap->principals.size(), snap->groups.size(),
              snap->models.size(), snap->examples.size(), snap->sha256.c_str());
  return 0;
}

int RunHash(const std::vector<std::string>& args) {
  if (args.size() != 1) return Usage("hash takes exactly one FILE");
  std::shared_ptr<const Snapshot> snap = LoadOrReport(args[0]);
  if (snap == nullptr) return 1;
  std::printf("%s\n", snap->sha256.c_str());
  return 0;
}

void PrintDecision(const Decision& d) {
  std::printf("verdict: %s\n", VerdictName(d.verdict));
  std::printf("rule: %s\n", d.rule_id.c_str());
  if (!d.reason.empty()) std::printf("reason: %s\n", d.reason.c_str());
  if (!d.message.empty()) std::printf("message: %s\n", d.message.c_str());
  for (const ClampRecord& c : d.clamps) {
    std::printf("clamp: %s %s -> %s\n", c.field.c_str(), c.requested.c_str(), c.applied.c_str());
  }
  for (const OfferedToolVerdict& t : d.offered_tools) {
    std::printf("offered tool: %s %s (%s)\n", t.name.c_str(),
                t.granted ? "granted" : "not granted", t.rule_id.c_str());
  }
  if (!d.stripped_tools.empty()) {
    std::printf("stripped: %s\n", absl::StrJoin(d.stripped_tools, ",").c_str());
  }
  if (!d.principal.empty()) {
    std::printf("principal: %s (priority %s)\n", d.principal.c_str(), PriorityName(d.priority));
    std::printf("budgets: tokens_per_day=%s tokens_per_month=%s requests_per_minute=%s "
                "concurrent_requests=%s request_seconds=%lld\n",
                FormatBudget(d.budgets.tokens_per_day).c_str(),
                FormatBudget(d.budgets.tokens_per_month).c_str(),
                FormatBudget(d.budgets.requests_per_minute).c_str(),
                FormatBudget(d.budgets.concurrent_requests).c_str(),
                static_cast<long long>(d.budgets.request_seconds));
  }
  std::printf("policy_sha256: %s\n", d.policy_sha256.c_str());
}

int RunExplain(const std::vector<std::string>& args) {
  if (args.empty()) return Usage("explain needs a FILE");
  PolicyRequest request;
  uint32_t default_max_tokens = kDefaultMaxTokens;
  bool have_principal = false;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (i + 1 >= args.size()) return Usage(absl::StrCat(flag, " needs a value").c_str());
    const std::string& value = args[++i];
    if (flag == "--key" || flag == "--user") {
      if (have_principal) return Usage("give one of --key, --user");
      have_principal = true;
      (flag == "--key" ? request.api_key : request.principal) = value;
    } else if (flag == "--model") {
      request.model = value;
    } else if (flag == "--param") {
      size_t eq = value.find('=');
      std::optional<Param> param =
          eq == std::string::npos ? std::nullopt : ParamFromName(value.substr(0, eq));
      if (!param) return Usage(absl::StrCat("--param expects NAME=VALUE with a known NAME, got '", value, "'").c_str());
      auto parsed = ParseParamValue(*param, value.substr(eq + 1));
      if (!parsed.ok()) return Usage(std::string(parsed.status().message()).c_str());
      request.params.Set(*param, *parsed);
    } else if (flag == "--tool") {
      request.tools.push_back(ToolCallFromJson(value, "{}"));
    } else if (flag == "--args") {
      if (request.tools.empty()) return Usage("--args follows the --tool it belongs to");
      // The router reads a model's call with this same function.
      request.tools.back() = ToolCallFromJson(request.tools.back().name, value);
    } else if (flag == "--offer-tool") {
      request.offered_tools.push_back(value);
    } else if (flag == "--tool-choice-name") {
      request.tool_choice_name = value;  // tool_choice is then named, as in a request
      request.params.Set(Param::kToolChoice, static_cast<double>(ToolChoice::kNamed));
    } else if (flag == "--template-kwarg") {
      const size_t eq = value.find('=');
      if (eq == std::string::npos) return Usage("--template-kwarg expects KEY=JSON");
      absl::Status added = AddTemplateKwarg(&request, value.substr(0, eq), value.substr(eq + 1));
      if (!added.ok()) return Usage(std::string(added.message()).c_str());
    } else if (flag == "--default-max-tokens") {
      if (!absl::SimpleAtoi(value, &default_max_tokens) || default_max_tokens == 0) {
        return Usage("--default-max-tokens needs a whole number >= 1");
      }
    } else if (flag == "--command") {
      std::vector<std::string> argv;
      if (!SplitArgv(value, &argv)) return Usage("--command needs a non-empty, properly quoted ARGV");
      request.commands.push_back(std::move(argv));
    } else if (flag == "--cwd") {
      if (value.empty() || value[0] != '/') return Usage("--cwd needs an absolute directory");
      request.command_cwd = value;
    } else {
      return Usage(absl::StrCat("unknown option '", flag, "'").c_str());
    }
  }
  if (!have_principal) return Usage("explain needs --key K or --user U");
  std::shared_ptr<const Snapshot> snap = LoadOrReport(args[0]);
  if (snap == nullptr) return 1;
  // Omitted parameters are decided as the values a worker would use, as in the router.
  CompleteAsServed(&request, default_max_tokens);
  PrintDecision(Decide(*snap, request));
  return 0;
}

int RunPolicy(const std::vector<std::string>& args) {
  if (args.empty()) return Usage("expected check, explain or hash");
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "check") return RunCheck(rest);
  if (args[0] == "hash") return RunHash(rest);
  if (args[0] == "explain") return RunExplain(rest);
  return Usage(absl::StrCat("unknown subcommand '", args[0], "'").c_str());
}

}  // namespace

const Subcommand kPolicyCommand = {
    "policy", "check, explain and hash an access-policy file",
    "Usage: gantry policy check FILE\n"
    "       gantry policy hash FILE\n"
    "       gantry policy explain FILE (--key K | --user U) [--model M]\n"
    "                             [--param NAME=VALUE ...] [--tool NAME [--args JSON] ...]\n"
    "                             [--offer-tool NAME ...] [--tool-choice-name NAME]\n"
    "                             [--template-kwarg KEY=JSON ...] [--default-max-tokens N]\n"
    "                             [--command \"ARGV...\" ...] [--cwd DIR]\n"
    "\n"
    "check    validates FILE (schema: docs/policy.md) and runs its inline examples\n"
    "hash     prints the SHA-256 of the snapshot FILE compiles to (of its bytes)\n"
    "explain  prints the decision for one request: verdict, deciding rule, reason,\n"
    "         clamped values, the principal's priority and budgets\n"
    "  --key K          the presented API key (hashed, then looked up)\n"
    "  --user U         a user or service account by name\n"
    "  --param N=V      max_tokens, temperature, top_p, top_k, seed, stop_strings,\n"
    "                   tool_choice, parallel_tool_calls, reasoning_effort,\n"
    "                   enable_thinking; one left out is decided as the value a worker\n"
    "                   uses (as the router does)\n"
    "  --tool NAME      a tool call the model emits; --args '{\"path\":\"/workspace/a\"}'\n"
    "                   gives its arguments as JSON text (as the router reads them)\n"
    "  --offer-tool N   a tool the request offers the model (its `tools`)\n"
    "  --tool-choice-name N  tool_choice names tool N\n"
    "  --template-kwarg K=J  a chat_template_kwargs member (J: its JSON value)\n"
    "  --default-max-tokens N  the bundle's default output cap (default 1024)\n"
    "  --command ARGV   a command line; argv[0] must be the resolved absolute path\n"
    "\n"
    "Exit status: 0 success (explain: a decision was printed), 1 the policy did not load\n"
    "(errors on stderr as FILE:LINE:COLUMN: PATH: message), 2 usage error.\n",
    &RunPolicy};

}  // namespace gantry::policy
