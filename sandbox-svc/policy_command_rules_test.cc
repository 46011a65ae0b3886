// Command rules from the access policy: a principal's grants[i].commands decide a
// sandbox command after resolution and unwrapping (policy_command_rules.h).
#include "sandbox-svc/policy_command_rules.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "policy/policy_loader.h"
#include "sandbox-svc/sandbox_test_support.h"

namespace gantry::sandbox {
namespace {

using testing::FakeResolver;

// dana (developers) and the harness service account. Key hashes are of made-up keys.
constexpr char kPolicy[] = R"(version: 1
defaults:
  budgets: {tokens_per_day: 1000, tokens_per_month: 10000, requests_per_minute: 10, concurrent_requests: 2}
models:
  - {name: m1, bundles: [b1]}
principals:
  groups:
    - {name: developers}
  users:
    - {name: dana, key_sha256: 0000000000000000000000000000000000000000000000000000000000000001, priority: interactive, groups: [developers]}
  service_accounts:
    - {name: harness, key_sha256: 0000000000000000000000000000000000000000000000000000000000000002, priority: batch}
grants:
  - group: developers
    commands:
      - executable: /usr/bin/git
        subcommands: [status, log, diff]
      - executable: /usr/bin/cat
        operands: {globs: ["/workspace/**"]}
      - executable: /usr/bin/env
      - executable: /usr/bin/find
      - executable: /usr/bin/xargs
      - executable: /usr/bin/rm
      - executable: /usr/bin/python3
        allowed_flags: [-V]
  - user: dana
    commands:
      - executable: /usr/bin/git
        forbidden_flags: [--output]
    deny:
      commands: [/usr/bin/rm]
  - service_account: harness
    commands:
      - executable: /usr/bin/cat
examples:
  - should_deny: {principal: dana, commands: [[/usr/bin/git, log, --outp=/tmp/x]]}
    rule: grants[1].commands[0]
)";

class PolicyCommandRulesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loaded = policy::LoadPolicyText(kPolicy, "policy.yaml");
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    snapshot_ = *loaded;
  }
  CommandDecision D(const std::string& principal, const std::vector<std::string>& argv,
                    const std::string& cwd = "/workspace") {
    return DecideCommand(PolicyCommandRules(snapshot_, principal, resolver_), argv, cwd,
                         resolver_);
  }

  std::shared_ptr<const policy::Snapshot> snapshot_;
  FakeResolver resolver_;
};

TEST_F(PolicyCommandRulesTest, AGrantedCommandIsAllowedByItsRule) {
  CommandDecision d = D("dana", {"cat", "src/a.c"});
  EXPECT_TRUE(d.allowed) << d.reason;
  EXPECT_EQ(d.rule_id, "grants[0].commands[1]");
  EXPECT_EQ(d.argv[0], "/usr/bin/cat");
  d = D("harness", {"cat", "/etc/passwd"});  // the harness's own rule has no operand globs
  EXPECT_TRUE(d.allowed) << d.reason;
  EXPECT_EQ(d.rule_id, "grants[2].commands[0]");
}

TEST_F(PolicyCommandRulesTest, DenyByDefault) {
  CommandDecision d = D("harness", {"git", "status"});
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.reason, "rule:default_deny: no grant of 'harness' names executable '/usr/bin/git'");
  EXPECT_EQ(d.rule_id, "default_deny");
  d = D("nobody", {"cat", "a"});
  EXPECT_FALSE(d.allowed);
  EXPECT_TRUE(absl::StrContains(d.reason, "is not a user or service account")) << d.reason;
}

TEST_F(PolicyCommandRulesTest, OperandsAreReadAgainstTheWorkingDirectory) {
  EXPECT_TRUE(D("dana", {"cat", "a.txt"}, "/workspace/src").allowed);
  CommandDecision d = D("dana", {"cat", "../../etc/shadow"}, "/workspace/src");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.rule_id, "grants[0].commands[1]");
  EXPECT_TRUE(absl::StrContains(d.reason, "(/etc/shadow)")) << d.reason;
}

TEST_F(PolicyCommandRulesTest, AnExplicitDenyWinsOverTheGroupsGrant) {
  CommandDecision d = D("dana", {"rm", "a.txt"});
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.rule_id, "grants[1].deny.commands[0]");
}

TEST_F(PolicyCommandRulesTest, EveryGrantNamingTheExecutableMustAllow) {
  EXPECT_TRUE(D("dana", {"git", "log", "--oneline"}).allowed);
  CommandDecision d = D("dana", {"git", "push"});  // the group's rule
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.rule_id, "grants[0].commands[0]");
  d = D("dana", {"git", "log", "--outp=/tmp/x"});  // dana's own rule, abbreviated flag
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.rule_id, "grants[1].commands[0]");
}

TEST_F(PolicyCommandRulesTest, GitGlobalOptionsAreCheckedAfterTheSubcommand) {
  EXPECT_TRUE(D("dana", {"git", "-C", "sub", "status"}).allowed);
  EXPECT_FALSE(D("dana", {"git", "--no-pager", "push"}).allowed);
  EXPECT_FALSE(D("dana", {"git", "-c", "alias.x=!rm a", "x"}).allowed);
}

TEST_F(PolicyCommandRulesTest, WrappedProgramsAreDecidedOnTheirOwn) {
  EXPECT_TRUE(D("dana", {"env", "FOO=1", "cat", "a.txt"}).allowed);
  CommandDecision d = D("dana", {"env", "rm", "a.txt"});
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.rule_id, "grants[1].deny.commands[0]");
  d = D("dana", {"env", "sh", "-c", "cat a.txt"});
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.reason, "rule:default_deny: no grant of 'dana' names executable '/usr/bin/sh'");
  d = D("dana", {"./cat", "a.txt"});  // a link in the workspace to rm
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.resolved_executable, "/usr/bin/rm");
}

TEST_F(PolicyCommandRulesTest, PolicyPathsAreResolvedLikeTheProgram) {
  // The policy names /usr/bin/python3; the program resolves to /usr/bin/python3.11.
  CommandDecision d = D("dana", {"python3", "-V"});
  EXPECT_TRUE(d.allowed) << d.reason;
  EXPECT_EQ(d.argv[0], "/usr/bin/python3.11");
  EXPECT_FALSE(D("dana", {"python3", "-c", "print(1)"}).allowed);
}

// Issue 17's bypasses, decided through a principal's policy grants (operand globs).
TEST_F(PolicyCommandRulesTest, WrapperGrammarsFeedTheOperandGlobs) {
  // find -exec: '+' is an ordinary argument unless it follows "{}".
  CommandDecision d = D("dana", {"find", ".", "-exec", "cat", "+", "/usr/lib/os-release", ";"});
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.rule_id, "grants[0].commands[1]");
  EXPECT_TRUE(absl::StrContains(d.reason, "/usr/lib/os-release")) << d.reason;
  // -execdir runs in the directories find walks: operands are read against its start
  // points, not the working directory.
  d = D("dana", {"find", "/etc", "-name", "passwd", "-execdir", "cat", "passwd", ";"});
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.rule_id, "grants[0].commands[1]");
  EXPECT_TRUE(absl::StrContains(d.reason, "(/etc/passwd)")) << d.reason;
  EXPECT_TRUE(D("dana", {"find", "src", "-execdir", "cat", "a.c", ";"}).allowed);
  EXPECT_TRUE(D("dana", {"find", "-execdir", "cat", "{}", "+"}).allowed);
  // xargs --eof takes no separate value: `id` is the command.
  d = D("dana", {"xargs", "--eof", "id", "cat"});
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.reason, "rule:default_deny: no grant of 'dana' names executable '/usr/bin/id'");
  // git: the repository is not the caller's to choose; -C's directory is an operand.
  d = D("dana", {"git", "--git-dir=evil", "--work-tree=.", "status"});
  EXPECT_FALSE(d.allowed);
  EXPECT_TRUE(absl::StrContains(d.reason, "chooses the repository")) << d.reason;
  EXPECT_TRUE(D("dana", {"env", "-S", "git\\_-C\\_sub\\_status"}).allowed);
}

// A /workspace path in the policy names a workspace file: one whose link leaves the
// workspace names nothing (whoever writes the workspace chooses the link). And a path
// that merely leads to the loader does not grant it (found by a red team:
// `tool -> /lib64/ld-linux-x86-64.so.2` ran any file as a program).
TEST_F(PolicyCommandRulesTest, WorkspaceLinksOutAndLinksToTheLoaderNameNothing) {
  auto policy = policy::LoadPolicyText(
      testing::PolicyGranting("tools", {"/workspace/cat", "/workspace/tool", "/usr/bin/env",
                                        "/usr/bin/myld"}),
      "policy.yaml");
  ASSERT_TRUE(policy.ok()) << policy.status();
  FakeResolver resolver;
  resolver.links["/workspace/tool"] = "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2";
  resolver.links["/lib64/ld-linux-x86-64.so.2"] = "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2";
  resolver.links["/usr/bin/myld"] = "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2";
  PolicyCommandRules rules(*policy, "tools", resolver);
  // /workspace/cat leads to /usr/bin/rm: rm is not granted by it.
  CommandDecision rm = DecideCommand(rules, {"/workspace/cat", "x"}, "/workspace", resolver);
  EXPECT_FALSE(rm.allowed) << rm.reason;
  EXPECT_TRUE(absl::StrContains(rm.reason, "rule:default_deny")) << rm.reason;
  CommandDecision loader = DecideCommand(rules, {"/workspace/tool", "/usr/bin/id"}, "/workspace", resolver);
  EXPECT_FALSE(loader.allowed) << loader.reason;
  CommandDecision direct =
      DecideCommand(rules, {"env", "/lib64/ld-linux-x86-64.so.2", "/usr/bin/id"}, "/workspace", resolver);
  EXPECT_FALSE(direct.allowed) << direct.reason;
  // A host path that leads to the loader (not a workspace one) does not grant it either.
  CommandDecision via = DecideCommand(rules, {"myld", "/usr/bin/id"}, "/workspace", resolver);
  EXPECT_FALSE(via.allowed) << via.reason;
  // Named by its own path, the loader is granted like any program.
  auto named = policy::LoadPolicyText(
      testing::PolicyGranting("tools", {"/lib64/ld-linux-x86-64.so.2"}), "policy.yaml");
  ASSERT_TRUE(named.ok()) << named.status();
  CommandDecision own = DecideCommand(PolicyCommandRules(*named, "tools", resolver),
                                      {"/lib64/ld-linux-x86-64.so.2", "--version"}, "/workspace", resolver);
  EXPECT_TRUE(own.allowed) << own.reason;
}

}  // namespace
}  // namespace gantry::sandbox
