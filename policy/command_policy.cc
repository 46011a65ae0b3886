#include "policy/command_policy.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "policy/policy_loader.h"

namespace gantry::policy {
namespace {

// A YAML double-quoted scalar holding exactly `text`.
std::string Quoted(absl::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (u < 0x20 || u == 0x7f) {
      char escaped[5];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", u);
      out += escaped;
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
  return out;
}

std::string QuotedList(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) absl::StrAppend(&out, i ? ", " : "", Quoted(items[i]));
  return out + "]";
}

}  // namespace

std::string CommandPolicyText(absl::string_view principal, const std::vector<CommandRule>& rules) {
  std::string text = absl::StrCat(
      "version: 1\n"
      "defaults: {budgets: {tokens_per_day: 0, tokens_per_month: 0, requests_per_minute: 0,"
      " concurrent_requests: 0}}\n"
      "models: []\n"
      "principals:\n"
      "  service_accounts:\n"
      "    - {name: ", Quoted(principal), ", key_sha256: ", std::string(63, '0'),
      "1, priority: batch}\n"
      "grants:\n"
      "  - service_account: ", Quoted(principal), "\n"
      "    commands:", rules.empty() ? " []" : "", "\n");
  for (const CommandRule& rule : rules) {
    absl::StrAppend(&text, "      - executable: ", Quoted(rule.executable), "\n");
    if (!rule.subcommands.empty()) {
      absl::StrAppend(&text, "        subcommands: ", QuotedList(rule.subcommands), "\n");
    }
    if (rule.has_allowed_flags) {
      absl::StrAppend(&text, "        allowed_flags: ", QuotedList(rule.allowed_flags), "\n");
    }
    if (!rule.forbidden_flags.empty()) {
      absl::StrAppend(&text, "        forbidden_flags: ", QuotedList(rule.forbidden_flags), "\n");
    }
    if (!rule.operand_globs.empty()) {
      absl::StrAppend(&text, "        operands: {globs: ", QuotedList(rule.operand_globs), "}\n");
    }
    if (rule.max_args >= 0) absl::StrAppend(&text, "        max_args: ", rule.max_args, "\n");
  }
  return text;
}

absl::StatusOr<std::shared_ptr<const Snapshot>> LoadCommandPolicy(
    absl::string_view principal, const std::vector<CommandRule>& rules, absl::string_view source) {
  return LoadPolicyText(CommandPolicyText(principal, rules), source);
}

std::string CommandPolicyRuleId(size_t i) { return absl::StrCat("grants[0].commands[", i, "]"); }

}  // namespace gantry::policy
