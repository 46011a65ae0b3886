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

// The test head with its defaults' budgets mapping replaced by `budgets`.
std::string HeadWithDefaultBudgets(const std::string& budgets) {
  std::string head = TestPolicyHead();
  const std::string from = "  budgets: {";
  const size_t at = head.find(from);
  const size_t end = head.find('\n', at);
  EXPECT_NE(at, std::string::npos);
  head.replace(at, end - at, "  budgets: " + budgets);
  return head;
}

TEST(LoaderTest, BudgetValuesAreAnIntegerOrUnlimitedAndNothingElse) {
  const std::string line = std::to_string(HeadLines() + 1);
  const std::string expected =
      "expected an integer in [0, 9007199254740992] or unlimited, got ";
  // value as written -> how the message describes it
  const std::pair<const char*, const char*> bad[] = {
      {"-5", "a scalar ('-5')"},
      {"\"100\"", "a quoted string ('100')"},
      {"'unlimited'", "a quoted string ('unlimited')"},
      {"10.5", "a scalar ('10.5')"},
      {"1e6", "a scalar ('1e6')"},
      {"Unlimited", "a scalar ('Unlimited')"},
      {"UNLIMITED", "a scalar ('UNLIMITED')"},
      {"inf", "a scalar ('inf')"},
      {".inf", "a scalar ('.inf')"},
      {"none", "a scalar ('none')"},
      {"9007199254740993", "a scalar ('9007199254740993')"},
      {"[1]", "a sequence"},
  };
  for (const auto& [value, described] : bad) {
    const std::string grant =
        absl::StrCat("  - {user: alice, budgets: {tokens_per_day: ", value, "}}\n");
    const std::string column = std::to_string(grant.find(value) + 1);
    EXPECT_EQ(ErrorOf(grant), absl::StrCat("test.yaml:", line, ":", column,
                                           ": grants[0].budgets.tokens_per_day: ", expected,
                                           described));
  }
  // null, ~ and nothing at all are null; yaml-cpp gives a null no position of its own,
  // so the message has the enclosing mapping's (column 29, its '{').
  for (const char* value : {"null", "~", ""}) {
    EXPECT_EQ(ErrorOf(absl::StrCat("  - {user: alice, budgets: {concurrent_requests: ", value,
                                   "}}\n")),
              absl::StrCat("test.yaml:", line, ":29: grants[0].budgets.concurrent_requests: ",
                           expected, "null"));
  }
  // In the defaults, with their path.
  auto snap = LoadPolicyText(
      HeadWithDefaultBudgets("{tokens_per_day: 1000, tokens_per_month: infinite, "
                             "requests_per_minute: 10, concurrent_requests: 3}") +
          "grants: []\n",
      "d.yaml");
  ASSERT_FALSE(snap.ok());
  EXPECT_EQ(snap.status().message(),
            "d.yaml:3:53: defaults.budgets.tokens_per_month: " + expected +
                "a scalar ('infinite')");
  // request_seconds is a number of seconds, never unlimited, never 0.
  EXPECT_EQ(ErrorOf("  - {user: alice, budgets: {request_seconds: unlimited}}\n"),
            "test.yaml:" + line +
                ":46: grants[0].budgets.request_seconds: request_seconds cannot be unlimited; "
                "expected an integer in [1, 31622400]");
  EXPECT_EQ(ErrorOf("  - {user: alice, budgets: {request_seconds: 0}}\n"),
            "test.yaml:" + line +
                ":46: grants[0].budgets.request_seconds: expected an integer in [1, 31622400], "
                "got 0");
}

TEST(LoaderTest, BudgetsOfZeroAndUnlimitedCombineByMinimum) {
  // alice: devs; bob: devs, ops; carol: no group; harness: service account.
  auto snap = LoadPolicyText(
      HeadWithDefaultBudgets("{tokens_per_day: unlimited, tokens_per_month: 0, "
                             "requests_per_minute: unlimited, concurrent_requests: 3}") +
          "grants:\n"
          "  - {group: devs, budgets: {tokens_per_day: 500, requests_per_minute: unlimited}}\n"
          "  - {group: ops, budgets: {tokens_per_day: 0, concurrent_requests: unlimited}}\n"
          "  - {user: alice, budgets: {tokens_per_month: unlimited, concurrent_requests: 0}}\n"
          "  - {user: carol, budgets: {tokens_per_day: unlimited, requests_per_minute: 7}}\n",
      "c.yaml");
  ASSERT_TRUE(snap.ok()) << snap.status();
  auto budgets = [&](const char* name) {
    const Budgets& b = (*snap)->principals[(*snap)->by_name.at(name)].budgets;
    return absl::StrCat(FormatBudget(b.tokens_per_day), " ", FormatBudget(b.tokens_per_month),
                        " ", FormatBudget(b.requests_per_minute), " ",
                        FormatBudget(b.concurrent_requests), " ", b.request_seconds);
  };
  // unlimited and 500 give 500; the default 0 stays 0 whatever a grant says; 3 and 0
  // give 0.
  EXPECT_EQ(budgets("alice"), "500 0 unlimited 0 1800");
  // 500 and 0 give 0; a grant's unlimited lowers nothing.
  EXPECT_EQ(budgets("bob"), "0 0 unlimited 3 1800");
  EXPECT_EQ(budgets("carol"), "unlimited 0 7 3 1800");
  EXPECT_EQ(budgets("harness"), "unlimited 0 unlimited 3 1800");
  EXPECT_EQ((*snap)->defaults.tokens_per_day, kUnlimited);
  EXPECT_TRUE(IsUnlimited((*snap)->defaults.requests_per_minute));
  EXPECT_FALSE(IsUnlimited((*snap)->defaults.tokens_per_month));
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

namespace gantry::policy {
namespace {

// 'allow' once passed ungranted offered tools to the model; it is gone, and a file that
// still says it does not load (rather than load with another meaning).
TEST(LoaderTest, AdvertisedToolsAllowNoLongerLoads) {
  std::string text = TestPolicyHead() + "grants: []\n";
  const std::string at = "defaults:\n";
  text.insert(text.find(at) + at.size(), "  advertised_tools: allow\n");
  auto snap = LoadPolicyText(text, "p.yaml");
  ASSERT_FALSE(snap.ok());
  EXPECT_NE(snap.status().message().find(
                "p.yaml:3:21: defaults.advertised_tools: expected strip or reject, got 'allow' (removed"),
            std::string::npos)
      << snap.status();
  text.replace(text.find("allow"), 5, "strip");
  EXPECT_TRUE(LoadPolicyText(text, "p.yaml").ok());
}

// A stop_strings min under clamp could not be honoured (no stop strings to add).
TEST(LoaderTest, StopStringsMinCannotBeClamped) {
  auto snap = LoadPolicyText(TestPolicyHead() +
                                 "grants:\n  - user: alice\n    models:\n      m1:\n"
                                 "        stop_strings: {min: 1, action: clamp}\n",
                             "p.yaml");
  ASSERT_FALSE(snap.ok());
  EXPECT_NE(snap.status().message().find("a min cannot be clamped to"), std::string::npos)
      << snap.status();
  EXPECT_TRUE(LoadPolicyText(TestPolicyHead() +
                                 "grants:\n  - user: alice\n    models:\n      m1:\n"
                                 "        stop_strings: {min: 1, action: reject}\n",
                             "p.yaml")
                  .ok());
}

}  // namespace
}  // namespace gantry::policy

namespace gantry::policy {
namespace {

// An example's tool argument is read as a model's JSON would be: an unquoted number is
// not a string, so a constraint refuses it, as the router does.
TEST(LoaderTest, ExampleArgumentsAreTypedAsTheRouterReadsThem) {
  const std::string grant =
      "grants:\n  - user: alice\n    tools:\n      read_file: {args: {path: {globs: [\"**\"]}}}\n";
  auto allow_number = LoadPolicyText(
      TestPolicyHead() + grant +
          "examples:\n  - should_allow: {principal: alice, tools: [{name: read_file, args: {path: 5}}]}\n",
      "p.yaml");
  EXPECT_FALSE(allow_number.ok());
  auto deny_number = LoadPolicyText(
      TestPolicyHead() + grant +
          "examples:\n  - should_deny: {principal: alice, tools: [{name: read_file, args: {path: 5}}]}\n"
          "  - should_allow: {principal: alice, tools: [{name: read_file, args: {path: '5'}}]}\n",
      "p.yaml");
  EXPECT_TRUE(deny_number.ok()) << deny_number.status();
}

}  // namespace
}  // namespace gantry::policy
