// Fuzz target: a tool call as a model (or a rogue worker) emits it, read and decided by
// the policy exactly as the router does (policy::ToolCallFromJson + Decide). Input: the
// tool name up to the first newline, then the call's arguments as JSON text.
// Invariants: never crashes; a call is allowed only when its tool is granted and its
// arguments are one JSON object with distinct keys (so a malformed call is never
// allowed); a repeated key anywhere is refused by the strict JSON parse.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "common/json.h"
#include "policy/policy_decide.h"
#include "policy/policy_loader.h"

namespace {

const gantry::policy::Snapshot& Policy() {
  static const std::shared_ptr<const gantry::policy::Snapshot> snapshot = [] {
    auto s = gantry::policy::LoadPolicyText(
        "version: 1\n"
        "defaults:\n"
        "  budgets: {tokens_per_day: 1, tokens_per_month: 1, requests_per_minute: 1, "
        "concurrent_requests: 1}\n"
        "models: [{name: m, bundles: [b]}]\n"
        "principals:\n"
        "  users:\n"
        "    - {name: u, key_sha256: 0000000000000000000000000000000000000000000000000000000000000000,"
        " priority: interactive}\n"
        "grants:\n"
        "  - user: u\n"
        "    tools:\n"
        "      read_file: {args: {path: {globs: [\"/workspace/**\"]}, mode: {one_of: [text]}}}\n"
        "      now: {}\n",
        "fuzz.yaml");
    if (!s.ok()) std::abort();
    return *s;
  }();
  return *snapshot;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t newline = input.find('\n');
  const std::string name = newline == std::string::npos ? "read_file" : input.substr(0, newline);
  const std::string arguments = newline == std::string::npos ? input : input.substr(newline + 1);
  gantry::policy::PolicyRequest r;
  r.principal = "u";
  r.tools.push_back(gantry::policy::ToolCallFromJson(name, arguments));
  const gantry::policy::Decision d = gantry::policy::Decide(Policy(), r);
  if (d.verdict != gantry::policy::Verdict::kDeny) {
    if (name != "read_file" && name != "now") std::abort();
    gantry::json::ParseOptions strict;
    strict.reject_duplicate_keys = true;
    auto parsed = gantry::json::Parse(arguments, strict);
    if (!parsed.ok() || !parsed->is_object()) std::abort();
  }
  return 0;
}
