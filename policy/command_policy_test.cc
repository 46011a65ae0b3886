#include "policy/command_policy.h"

#include "gtest/gtest.h"
#include "policy/policy_decide.h"

namespace gantry::policy {
namespace {

CommandRule Rule(std::string executable) {
  CommandRule rule;
  rule.executable = std::move(executable);
  return rule;
}

Decision Ask(const Snapshot& s, std::vector<std::string> argv) {
  PolicyRequest r;
  r.principal = "task";
  r.command_cwd = "/workspace";
  r.commands.push_back(std::move(argv));
  return Decide(s, r);
}

TEST(CommandPolicy, TheRulesDecideAsInAPolicyFile) {
  CommandRule git = Rule("/usr/bin/git");
  git.subcommands = {"status", "log"};
  git.forbidden_flags = {"--output"};
  CommandRule ls = Rule("/usr/bin/ls");
  ls.has_allowed_flags = true;
  ls.allowed_flags = {"-l"};
  ls.max_args = 2;
  CommandRule cat = Rule("/usr/bin/cat");
  cat.operand_globs = {"/workspace/\"odd\\ name\"/*", "/workspace/src/**"};
  auto s = LoadCommandPolicy("task", {git, ls, cat});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Ask(**s, {"/usr/bin/git", "log"}).rule_id, CommandPolicyRuleId(0));
  Decision d = Ask(**s, {"/usr/bin/git", "log", "--outp=x"});
  EXPECT_EQ(d.verdict, Verdict::kDeny);
  EXPECT_EQ(d.rule_id, "grants[0].commands[0]");
  EXPECT_EQ(Ask(**s, {"/usr/bin/ls", "-l", "a"}).verdict, Verdict::kAllow);
  EXPECT_EQ(Ask(**s, {"/usr/bin/ls", "-a"}).verdict, Verdict::kDeny);
  EXPECT_EQ(Ask(**s, {"/usr/bin/ls", "a", "b", "c"}).verdict, Verdict::kDeny);
  EXPECT_EQ(Ask(**s, {"/usr/bin/cat", "src/a/b.c"}).rule_id, CommandPolicyRuleId(2));
  EXPECT_EQ(Ask(**s, {"/usr/bin/cat", "\"odd\\ name\"/x"}).verdict, Verdict::kAllow);
  EXPECT_EQ(Ask(**s, {"/usr/bin/cat", "../etc/passwd"}).verdict, Verdict::kDeny);
  d = Ask(**s, {"/usr/bin/rm", "x"});
  EXPECT_EQ(d.rule_id, "default_deny");
}

TEST(CommandPolicy, NoRulesGrantNothingAndBadRulesAreTheLoadersErrors) {
  auto s = LoadCommandPolicy("task", {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Ask(**s, {"/usr/bin/cat"}).verdict, Verdict::kDeny);
  auto bad = LoadCommandPolicy("task", {Rule("cat")}, "m.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("grants[0].commands[0].executable"), std::string::npos)
      << bad.status();
  EXPECT_FALSE(LoadCommandPolicy("no spaces", {}).ok());
}

}  // namespace
}  // namespace gantry::policy
