#include "policy/policy_loader.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "policy/policy_test_util.h"

namespace gantry::policy {
namespace {

// The error message for a policy made of the test head and `grants`.
std::string ErrorOf(const std::string& grants, const std::string& tail = "") {
  auto snap = LoadTestPolicy(grants, tail);
  if (snap.ok()) return "(loaded)";
  EXPECT_EQ(snap.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(snap.status().message());
}

int HeadLines() {
  std::string head = TestPolicyHead();
  return static_cast<int>(std::count(head.begin(), head.end(), '\n')) + 1;  // + "grants:"
}

TEST(LoaderTest, DemoPolicyLoadsAndItsExamplesHold) {
  auto snap = LoadPolicyFile("deploy/policy.example.yaml");
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ((*snap)->source, "policy.example.yaml");
  EXPECT_EQ((*snap)->principals.size(), 5u);
  EXPECT_GE((*snap)->examples.size(), 10u);
  EXPECT_EQ((*snap)->sha256.size(), 64u);
}

TEST(LoaderTest, HashIsOfTheBytes) {
  std::string text = TestPolicyHead() + "grants: []\n";
  auto a = LoadPolicyText(text, "a.yaml");
  auto b = LoadPolicyText(text + "# a comment\n", "a.yaml");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*a)->sha256, Sha256Hex(text));
  EXPECT_NE((*a)->sha256, (*b)->sha256);
}

TEST(LoaderTest, WrongTypeNamesFileLineColumnPathAndWhatWasExpected) {
  int line = HeadLines() + 4;
  std::string message = ErrorOf(
      "  - user: alice\n"
      "    models:\n"
      "      m1:\n"
      "        temperature: 0.7\n");
  EXPECT_EQ(message, "test.yaml:" + std::to_string(line) +
                         ":22: grants[0].models.m1.temperature: expected a mapping with "
                         "min/max/action, got a scalar ('0.7')");
}

TEST(LoaderTest, UnknownKey) {
  std::string message = ErrorOf("  - {user: alice, modles: {m1: {}}}\n");
  EXPECT_TRUE(absl::StrContains(message, "grants[0]: unknown key 'modles'")) << message;
  message = ErrorOf("  - {user: alice, models: {m1: {temperature: {max: 1, clmap: 1}}}}\n");
  EXPECT_TRUE(absl::StrContains(message, "unknown key 'clmap'")) << message;
  message = ErrorOf("  - {user: alice, models: {m1: {temprature: {max: 1}}}}\n");
  EXPECT_TRUE(absl::StrContains(message, "unknown parameter 'temprature'")) << message;
}

TEST(LoaderTest, DuplicateKeys) {
  int line = HeadLines() + 3;
  std::string message = ErrorOf(
      "  - user: alice\n"
      "    models: {m1: {}}\n"
      "    models: {m2: {}}\n");
  EXPECT_EQ(message, "test.yaml:" + std::to_string(line) + ":5: grants[0]: duplicate key 'models'");
  message = ErrorOf("  - {user: alice, models: {m1: {}, m1: {max_tokens: {max: 1}}}}\n");
  EXPECT_TRUE(absl::StrContains(message, "duplicate key 'm1'")) << message;
}

TEST(LoaderTest, StrictScalars) {
  EXPECT_TRUE(absl::StrContains(
      ErrorOf("  - {user: alice, models: {m1: {max_tokens: {max: \"100\"}}}}\n"),
      "expected a number, got a quoted string ('100')"));
  EXPECT_TRUE(absl::StrContains(
      ErrorOf("  - {user: alice, models: {m1: {max_tokens: {max: 10.5}}}}\n"),
      "expected a whole number for max_tokens"));
  // Found by the fuzzer: a huge value must be refused without an out-of-range cast.
  EXPECT_TRUE(absl::StrContains(
      ErrorOf("  - {user: alice, models: {m1: {top_k: {max: 1.6e+85}}}}\n"),
      "expected a whole number for top_k"));
  EXPECT_TRUE(absl::StrContains(
      ErrorOf("  - {user: alice, models: {m1: {parallel_tool_calls: {allowed: yes}}}}\n"),
      "expected true or false"));
  EXPECT_TRUE(absl::StrContains(
      ErrorOf("  - {user: alice, models: {m1: {temperature: {min: 2, max: 1}}}}\n"),
      "min is greater than max"));
  EXPECT_TRUE(absl::StrContains(
      ErrorOf("  - {user: alice, models: {m1: {tool_choice: {allowed: [auto], action: clamp}}}}\n"),
      "tool_choice cannot be clamped"));
}

TEST(LoaderTest, UnknownReferences) {
  EXPECT_TRUE(absl::StrContains(ErrorOf("  - {group: admins}\n"), "unknown group 'admins'"));
  EXPECT_TRUE(absl::StrContains(ErrorOf("  - {user: zed}\n"), "unknown user 'zed'"));
  EXPECT_TRUE(absl::StrContains(ErrorOf("  - {user: harness}\n"),
                                "'harness' is a service_account, not a user"));
  EXPECT_TRUE(absl::StrContains(ErrorOf("  - {user: alice, models: {m7: {}}}\n"),
                                "unknown model 'm7'"));
  EXPECT_TRUE(absl::StrContains(ErrorOf("  - {user: alice, deny: {models: [m7]}}\n"),
                                "unknown model 'm7'"));
  EXPECT_TRUE(absl::StrContains(ErrorOf("  - {user: alice, group: devs}\n"),
                                "exactly one of user, service_account, group"));
  EXPECT_TRUE(absl::StrContains(
      ErrorOf("  - {user: alice, commands: [{executable: git}]}\n"),
      "expected the absolute, resolved path of an executable"));
}

TEST(LoaderTest, PrincipalErrors) {
  std::string base = TestPolicyHead();
  auto bad = [&](const std::string& from, const std::string& to) {
    std::string text = base + "grants: []\n";
    size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    auto snap = LoadPolicyText(text, "p.yaml");
    EXPECT_FALSE(snap.ok());
    return std::string(snap.status().message());
  };
  EXPECT_TRUE(absl::StrContains(bad("priority: batch", "priority: urgent"),
                                "expected interactive, accessibility or batch"));
  EXPECT_TRUE(absl::StrContains(bad("groups: [devs, ops]", "groups: [devs, nope]"),
                                "unknown group 'nope'"));
  EXPECT_TRUE(absl::StrContains(bad("name: carol", "name: alice"), "duplicate principal 'alice'"));
  EXPECT_TRUE(absl::StrContains(bad(Sha256Hex("key-bob"), Sha256Hex("key-alice")),
                                "already used by another principal"));
  EXPECT_TRUE(absl::StrContains(bad(Sha256Hex("key-bob"), "abc"), "64 lowercase hex digits"));
  EXPECT_TRUE(absl::StrContains(bad("version: 1", "version: 2"), "expected an integer in [1, 1]"));
  EXPECT_TRUE(absl::StrContains(bad("defaults:\n  budgets: {tokens_per_day: 1000, ",
                                    "defaults:\n  budgets: {"),
                                "missing required key 'tokens_per_day'"));
}

TEST(LoaderTest, SyntaxErrorsAliasesAndDocuments) {
  auto snap = LoadPolicyText("version: 1\nmodels: [a, b\n", "s.yaml");
  ASSERT_FALSE(snap.ok());
  EXPECT_TRUE(absl::StartsWith(snap.status().message(), "s.yaml:")) << snap.status();
  EXPECT_TRUE(absl::StrContains(snap.status().message(), "YAML syntax")) << snap.status();

  snap = LoadPolicyText(TestPolicyHead() + "grants:\n  - &g {user: alice}\n  - *g\n", "a.yaml");
  ASSERT_FALSE(snap.ok());
  EXPECT_TRUE(absl::StrContains(snap.status().message(), "aliases (*name) are not allowed"));

  snap = LoadPolicyText(TestPolicyHead() + "grants: []\n---\nversion: 1\n", "d.yaml");
  ASSERT_FALSE(snap.ok());
  EXPECT_TRUE(absl::StrContains(snap.status().message(), "exactly one YAML document"));

  snap = LoadPolicyText("", "e.yaml");
  EXPECT_FALSE(snap.ok());
  // Found by the fuzzer: yaml-cpp 0.7 reports a stray top-level ',' as endless empty
  // documents; the loader must still return.
  for (const char* text : {",", ",+O", "a: 1\n,", ",\n,\n"}) {
    snap = LoadPolicyText(text, "c.yaml");
    EXPECT_FALSE(snap.ok()) << text;
  }
  snap = LoadPolicyText("[1, 2]", "e.yaml");
  ASSERT_FALSE(snap.ok());
  EXPECT_TRUE(absl::StrContains(snap.status().message(), "expected a mapping with version"));
  snap = LoadPolicyText(std::string(kMaxPolicyBytes + 1, '#'), "big.yaml");
  EXPECT_FALSE(snap.ok());
}

TEST(LoaderTest, NonOverlappingBoundsForOnePrincipalAreAnError) {
  std::string message = ErrorOf(
      "  - {group: devs, models: {m1: {temperature: {max: 0.5}}}}\n"
      "  - {group: ops, models: {m1: {temperature: {min: 0.8}}}}\n");
  EXPECT_TRUE(absl::StrContains(message, "'bob' on model 'm1' bound temperature")) << message;
}

TEST(LoaderTest, ExamplesMustHold) {
  std::string grants = "  - {user: alice, models: {m1: {max_tokens: {max: 100, action: clamp}}}}\n";
  EXPECT_EQ(ErrorOf(grants,
                    "examples:\n"
                    "  - should_allow: {principal: alice, model: m1}\n"
                    "  - should_deny: {principal: carol, model: m1}\n"
                    "    reason: model_not_granted\n"
                    "  - should_clamp: {principal: alice, model: m1, params: {max_tokens: 500}}\n"
                    "    clamps: {max_tokens: 100}\n"
                    "    rule: grants[0].models.m1.max_tokens\n"
                    "  - should_deny: {key: wrong-key, model: m1}\n"
                    "    reason: unknown_principal\n"),
            "(loaded)");
  int line = HeadLines() + 3;
  std::string message = ErrorOf(grants,
                                "examples:\n"
                                "  - should_allow: {principal: carol, model: m1}\n"
                                "  - should_deny: {principal: alice, model: m1}\n");
  EXPECT_TRUE(absl::StrContains(
      message, "test.yaml:" + std::to_string(line) +
                   ":5: examples[0]: example failed: expected allow or clamp, got deny "
                   "(model_not_granted) by default_deny"))
      << message;
  EXPECT_TRUE(absl::StrContains(message, "examples[1]: example failed: expected deny"))
      << message;
  EXPECT_TRUE(absl::StrContains(
      ErrorOf(grants, "examples:\n  - should_allow: {principal: nobody, model: m1}\n"),
      "unknown principal 'nobody'"));
}

TEST(LoaderTest, MissingFile) {
  auto snap = LoadPolicyFile("no/such/policy.yaml");
  EXPECT_EQ(snap.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace gantry::policy
