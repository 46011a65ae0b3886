// Test-only helpers: a small policy head (defaults, models, principals) that tests
// complete with their own grants and examples.
#ifndef GANTRY_POLICY_POLICY_TEST_UTIL_H_
#define GANTRY_POLICY_POLICY_TEST_UTIL_H_

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "policy/policy_loader.h"

namespace gantry::policy {

// Principals: users alice (devs), bob (devs, ops), carol (no group); service account
// harness. The key of each is "key-<name>". Models m1, m2.
inline std::string TestPolicyHead() {
  auto user = [](const char* name, const char* priority, const char* groups) {
    return absl::StrCat("    - {name: ", name, ", key_sha256: ", Sha256Hex(absl::StrCat("key-", name)),
                        ", priority: ", priority, ", groups: ", groups, "}\n");
  };
  return absl::StrCat(
      "version: 1\n"
      "defaults:\n"
      "  budgets: {tokens_per_day: 1000, tokens_per_month: 10000, requests_per_minute: 10,"
      " concurrent_requests: 3}\n"
      "models:\n"
      "  - {name: m1, bundles: [b1]}\n"
      "  - {name: m2, bundles: [b2]}\n"
      "principals:\n"
      "  groups:\n"
      "    - {name: devs}\n"
      "    - {name: ops}\n"
      "  users:\n",
      user("alice", "interactive", "[devs]"), user("bob", "batch", "[devs, ops]"),
      user("carol", "accessibility", "[]"), "  service_accounts:\n",
      user("harness", "interactive", "[]"));
}

// Loads TestPolicyHead() + "grants:\n" + grants (+ tail, e.g. examples).
inline absl::StatusOr<std::shared_ptr<const Snapshot>> LoadTestPolicy(
    const std::string& grants, const std::string& tail = "") {
  return LoadPolicyText(absl::StrCat(TestPolicyHead(), "grants:\n", grants, tail), "test.yaml");
}

}  // namespace gantry::policy

#endif  // GANTRY_POLICY_POLICY_TEST_UTIL_H_
