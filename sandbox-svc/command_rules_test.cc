#include "sandbox-svc/command_rules.h"

#include <map>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "sandbox-svc/sandbox_test_support.h"

namespace gantry::sandbox {
namespace {

using testing::FakeResolver;

ExecutableRule Rule(std::string id, std::string path) {
  ExecutableRule r;
  r.id = std::move(id);
  r.path = std::move(path);
  return r;
}

class CommandRulesTest : public ::testing::Test {
 protected:
  CommandRulesTest() {
    rules_.name = "t";
    for (const char* w : {"env", "nice", "timeout", "xargs", "sh", "bash", "find", "cat",
                          "echo", "nohup", "stdbuf", "setsid", "ls"}) {
      rules_.executables.push_back(Rule(w, std::string("/usr/bin/") + w));
    }
    ExecutableRule git = Rule("git-read", "/usr/bin/git");
    git.subcommands = {"status", "log", "diff"};
    git.denied_flags = {"--output", "--ext-diff"};
    rules_.executables.push_back(git);
    ExecutableRule sed = Rule("sed", "/usr/bin/sed");
    sed.denied_flags = {"-i", "--in-place"};
    rules_.executables.push_back(sed);
    ExecutableRule py = Rule("python", "/usr/bin/python3.11");
    py.arg_patterns = {"tests/*.py"};
    rules_.executables.push_back(py);
  }
  CommandDecision D(std::vector<std::string> argv) {
    return DecideCommand(rules_, argv, "/workspace", resolver_);
  }
  CommandRules rules_;
  FakeResolver resolver_;
};

TEST_F(CommandRulesTest, AllowsListedExecutableAndResolvesIt) {
  auto d = D({"cat", "a.txt"});
  EXPECT_TRUE(d.allowed) << d.reason;
  EXPECT_EQ(d.rule_id, "cat");
  EXPECT_EQ(d.argv[0], "/usr/bin/cat");
  EXPECT_EQ(d.resolved_executable, "/usr/bin/cat");
}

TEST_F(CommandRulesTest, DeniesByDefault) {
  auto d = D({"rm", "-rf", "/"});
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.rule_id, "default-deny");
  EXPECT_TRUE(absl::StartsWith(d.reason, "rule:default-deny: /usr/bin/rm is not an allowed"))
      << d.reason;
  EXPECT_FALSE(D({}).allowed);
  EXPECT_FALSE(D({"missing-tool"}).allowed);
}

TEST_F(CommandRulesTest, ResolvesLinksBeforeMatching) {
  EXPECT_FALSE(D({"./cat", "x"}).allowed);  // a link to rm named cat
  EXPECT_EQ(D({"./cat", "x"}).resolved_executable, "/usr/bin/rm");
  EXPECT_FALSE(D({"/usr/bin/../bin/rm", "x"}).allowed);
  auto py = D({"python3", "tests/a.py"});
  EXPECT_TRUE(py.allowed) << py.reason;
  EXPECT_EQ(py.resolved_executable, "/usr/bin/python3.11");
}

TEST_F(CommandRulesTest, UnwrapsWrappers) {
  for (std::vector<std::string> argv : std::vector<std::vector<std::string>>{
           {"env", "rm", "x"},
           {"env", "-i", "A=1", "rm", "x"},
           {"env", "-u", "HOME", "rm", "x"},
           {"env", "-S", "rm x"},
           {"env", "--split-string=rm x"},
           {"nice", "rm"},
           {"nice", "-n", "5", "rm"},
           {"nice", "-10", "rm"},
           {"timeout", "5", "rm"},
           {"timeout", "-s", "KILL", "5", "rm"},
           {"timeout", "--kill-after=1", "5", "rm"},
           {"nohup", "rm"},
           {"stdbuf", "-o0", "rm"},
           {"setsid", "-f", "rm"},
           {"xargs", "rm"},
           {"xargs", "-0", "-n", "1", "rm"},
           {"sh", "-c", "rm x"},
           {"bash", "-ec", "rm x"},
           {"sh", "-c", "exec rm x"},
           {"sh", "-c", "'r''m' x"},
           {"sh", "-c", "r\\m x"},
           {"find", ".", "-exec", "rm", "{}", ";"},
           {"find", ".", "-execdir", "rm", "{}", "+"},
           {"env", "nice", "timeout", "1", "sh", "-c", "env rm"},
       }) {
    auto d = D(argv);
    EXPECT_FALSE(d.allowed) << argv[0] << " ... " << argv.back();
    EXPECT_EQ(d.resolved_executable, "/usr/bin/rm") << argv[0] << " ... " << argv.back();
  }
  auto ok = D({"env", "nice", "-n", "3", "timeout", "5", "sh", "-c", "cat 'a b.txt'"});
  EXPECT_TRUE(ok.allowed) << ok.reason;
  EXPECT_EQ(ok.resolved_executable, "/usr/bin/cat");
  EXPECT_EQ(ok.argv[0], "/usr/bin/env");
  EXPECT_EQ(ok.chain.size(), 5u);
  EXPECT_TRUE(D({"find", ".", "-name", "*.c", "-exec", "cat", "{}", "+"}).allowed);
  EXPECT_TRUE(D({"xargs"}).allowed);  // runs echo
}

TEST_F(CommandRulesTest, ShellTextMustBeOneSimpleCommand) {
  for (const char* text : {"cat a | rm b", "cat a; rm b", "cat a && rm b", "cat $(rm)",
                           "cat `rm`", "cat > x", "cat < x", "cat *", "cat ~/x", "A=1 cat",
                           "cat a\nrm b", "cat 'unterminated", "(cat)", "cat {a,b}", "cat \"$X\"",
                           "", "   "}) {
    EXPECT_FALSE(D({"sh", "-c", text}).allowed) << text;
  }
  EXPECT_FALSE(D({"sh", "script.sh"}).allowed);
  EXPECT_FALSE(D({"sh"}).allowed);
  EXPECT_FALSE(D({"sh", "-i", "-c", "cat"}).allowed);
  auto words = SplitSimpleCommand("cat \"a b\" 'c d' e\\ f \"q\\\"\"");
  ASSERT_TRUE(words.ok()) << words.status();
  EXPECT_EQ(*words, (std::vector<std::string>{"cat", "a b", "c d", "e f", "q\""}));
}

TEST_F(CommandRulesTest, GitGlobalOptionsAndSubcommands) {
  EXPECT_TRUE(D({"git", "status"}).allowed);
  EXPECT_TRUE(D({"git", "-C", "sub", "--no-pager", "log", "-n", "3"}).allowed);
  EXPECT_TRUE(D({"git", "--git-dir=.git", "diff"}).allowed);
  EXPECT_FALSE(D({"git", "push"}).allowed);
  EXPECT_FALSE(D({"git"}).allowed);
  EXPECT_FALSE(D({"git", "-c", "core.pager=rm", "log"}).allowed);
  EXPECT_FALSE(D({"git", "-ccore.pager=rm", "log"}).allowed);
  EXPECT_FALSE(D({"git", "--config-env=core.pager=X", "log"}).allowed);
  EXPECT_FALSE(D({"git", "--exec-path=/tmp", "log"}).allowed);
  EXPECT_FALSE(D({"git", "--weird", "log"}).allowed);
  auto d = D({"git", "-C", "x", "push"});
  EXPECT_TRUE(absl::StartsWith(d.reason, "rule:git-read: /usr/bin/git: subcommand 'push'"))
      << d.reason;
}

TEST_F(CommandRulesTest, NormalisesFlags) {
  EXPECT_TRUE(D({"git", "diff", "--stat"}).allowed);
  EXPECT_FALSE(D({"git", "diff", "--output=x"}).allowed);
  EXPECT_FALSE(D({"git", "diff", "--output", "x"}).allowed);
  EXPECT_FALSE(D({"git", "diff", "--outp=x"}).allowed);  // GNU abbreviation
  EXPECT_FALSE(D({"git", "diff", "--ext"}).allowed);
  EXPECT_TRUE(D({"git", "diff", "--", "--output"}).allowed);  // a path after --
  EXPECT_TRUE(D({"sed", "-n", "1p", "f"}).allowed);
  EXPECT_FALSE(D({"sed", "-i", "s/a/b/", "f"}).allowed);
  EXPECT_FALSE(D({"sed", "-ni", "s/a/b/", "f"}).allowed);  // cluster
  EXPECT_FALSE(D({"sed", "--in-place=.bak", "s/a/b/", "f"}).allowed);
  EXPECT_FALSE(D({"sed", "--in", "s/a/b/", "f"}).allowed);
}

TEST_F(CommandRulesTest, ArgumentPatterns) {
  EXPECT_TRUE(D({"python3", "tests/x.py"}).allowed);
  auto d = D({"python3", "evil.py"});
  EXPECT_FALSE(d.allowed);
  EXPECT_TRUE(absl::StrContains(d.reason, "argument 'evil.py' is not allowed")) << d.reason;
}

TEST_F(CommandRulesTest, AllowedFlagsAndMaxArgs) {
  ExecutableRule ls = Rule("ls", "/usr/bin/ls");
  ls.allowed_flags = {"-l", "-a", "--color"};
  ls.max_args = 3;
  rules_.executables = {ls};
  EXPECT_TRUE(D({"ls", "-la", "--color=never", "x"}).allowed);
  EXPECT_FALSE(D({"ls", "-lR"}).allowed);
  EXPECT_FALSE(D({"ls", "--recursive"}).allowed);
  auto d = D({"ls", "a", "b", "c", "d"});
  EXPECT_FALSE(d.allowed);
  EXPECT_TRUE(absl::StrContains(d.reason, "more than 3 arguments")) << d.reason;
}

TEST_F(CommandRulesTest, DeniesLookupChangingEnvironment) {
  EXPECT_FALSE(D({"env", "PATH=/workspace", "cat"}).allowed);
  EXPECT_FALSE(D({"env", "LD_PRELOAD=/workspace/x.so", "cat"}).allowed);
  EXPECT_FALSE(D({"env", "GIT_EXTERNAL_DIFF=rm", "git", "diff"}).allowed);
  EXPECT_TRUE(D({"env", "FOO=bar", "cat"}).allowed);
  EXPECT_TRUE(IsDeniedEnvName("LD_LIBRARY_PATH"));
  EXPECT_FALSE(IsDeniedEnvName("TERM"));
}

TEST_F(CommandRulesTest, ProgramNameFromInputIsDenied) {
  EXPECT_FALSE(D({"find", ".", "-exec", "{}", ";"}).allowed);
  EXPECT_FALSE(D({"xargs", "-I", "X", "X"}).allowed);
  EXPECT_FALSE(D({"find", ".", "-exec", "cat"}).allowed);  // unterminated
  EXPECT_FALSE(D({"env", "-C", "sub", "./cat"}).allowed);
}

TEST_F(CommandRulesTest, DeepNestingIsDenied) {
  std::vector<std::string> argv;
  for (int i = 0; i < 20; ++i) argv.push_back("env");
  argv.push_back("cat");
  auto d = D(argv);
  EXPECT_FALSE(d.allowed);
  EXPECT_TRUE(absl::StrContains(d.reason, "nested too deeply")) << d.reason;
}

}  // namespace
}  // namespace gantry::sandbox

namespace gantry::sandbox {
namespace {

// Outside input never crashes the decision or the shell splitter: a deterministic
// stream of random and mutated inputs.
TEST(CommandRulesRobustnessTest, RandomInputsNeverCrash) {
  CommandRules rules;
  rules.name = "t";
  for (const char* w : {"env", "sh", "find", "xargs", "git", "cat", "timeout", "nice"}) {
    rules.executables.push_back({w, std::string("/usr/bin/") + w, {"status"}, {"-x"}, {"*"}, {}, -1});
  }
  FakeResolver resolver;
  const std::vector<std::string> vocab = {
      "env", "sh", "-c", "find", "-exec", ";", "+", "xargs", "-I", "{}", "git", "-C", "--",
      "cat", "timeout", "5", "nice", "-n", "'", "\"", "\\", "$", "a b", "-S", "PATH=x",
      "=", "", "--x=", "-", "../..", "/workspace/cat", "\n", std::string(1, '\0')};
  uint64_t state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(state >> 33);
  };
  for (int i = 0; i < 20000; ++i) {
    std::vector<std::string> argv;
    const int n = static_cast<int>(next() % 12);
    for (int k = 0; k < n; ++k) {
      std::string w = vocab[next() % vocab.size()];
      if (next() % 4 == 0) w += vocab[next() % vocab.size()];
      argv.push_back(w);
    }
    CommandDecision d = DecideCommand(rules, argv, "/workspace", resolver);
    if (!d.allowed) {
      EXPECT_TRUE(absl::StartsWith(d.reason, "rule:")) << d.reason;
    }
    std::string text;
    for (const auto& a : argv) text += a + (next() % 2 ? " " : "");
    (void)SplitSimpleCommand(text);
  }
}

}  // namespace
}  // namespace gantry::sandbox
