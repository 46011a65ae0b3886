#include "sandbox-svc/command_rules.h"

#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "policy/command_policy.h"
#include "policy/policy_loader.h"
#include "sandbox-svc/policy_command_rules.h"
#include "sandbox-svc/sandbox_test_support.h"

namespace gantry::sandbox {
namespace {

using testing::FakeResolver;

policy::CommandRule Rule(std::string path) {
  policy::CommandRule r;
  r.executable = std::move(path);
  return r;
}

// The rules of these tests are a policy (policy/command_policy.h): principal "t" granted
// a list of command rules, each known here by a short name; ExpectDenied and Id() turn a
// name into the policy's rule id ("grants[0].commands[3]").
class CommandRulesTest : public ::testing::Test {
 protected:
  CommandRulesTest() {
    for (const char* w : {"env", "nice", "timeout", "xargs", "sh", "bash", "find", "cat",
                          "echo", "nohup", "stdbuf", "setsid", "ls"}) {
      Add(w, Rule(std::string("/usr/bin/") + w));
    }
    policy::CommandRule git = Rule("/usr/bin/git");
    git.subcommands = {"status", "log", "diff"};
    git.forbidden_flags = {"--output", "--ext-diff"};
    Add("git-read", git);
    policy::CommandRule sed = Rule("/usr/bin/sed");
    sed.forbidden_flags = {"-i", "--in-place"};
    Add("sed", sed);
    policy::CommandRule py = Rule("/usr/bin/python3.11");
    py.operand_globs = {"/workspace/tests/*.py"};
    Add("python", py);
  }
  void Add(std::string name, policy::CommandRule rule) {
    rules_.emplace_back(std::move(name), std::move(rule));
  }
  policy::CommandRule& Named(const std::string& name) {
    for (auto& [n, r] : rules_) {
      if (n == name) return r;
    }
    ADD_FAILURE() << "no rule " << name;
    return rules_.front().second;
  }
  // The policy's id of the rule called `name`; any other text as it is ("default_deny").
  std::string Id(const std::string& name) const {
    for (size_t i = 0; i < rules_.size(); ++i) {
      if (rules_[i].first == name) return policy::CommandPolicyRuleId(i);
    }
    return name;
  }
  std::shared_ptr<const policy::Snapshot> Policy() {
    std::vector<policy::CommandRule> rules;
    for (const auto& [name, rule] : rules_) rules.push_back(rule);
    const std::string text = policy::CommandPolicyText("t", rules);
    if (text != policy_text_) {
      auto loaded = policy::LoadPolicyText(text, "rules.yaml");
      EXPECT_TRUE(loaded.ok()) << loaded.status();
      if (!loaded.ok()) return nullptr;
      policy_ = *loaded;
      policy_text_ = text;
    }
    return policy_;
  }
  CommandDecision D(std::vector<std::string> argv) { return D(argv, resolver_); }
  CommandDecision D(const std::vector<std::string>& argv, const ExecutableResolver& resolver) {
    return DecideCommand(PolicyCommandRules(Policy(), "t", resolver), argv, "/workspace",
                         resolver);
  }
  std::vector<std::pair<std::string, policy::CommandRule>> rules_;
  FakeResolver resolver_;

 private:
  std::string policy_text_;
  std::shared_ptr<const policy::Snapshot> policy_;
};

TEST_F(CommandRulesTest, AllowsListedExecutableAndResolvesIt) {
  auto d = D({"cat", "a.txt"});
  EXPECT_TRUE(d.allowed) << d.reason;
  EXPECT_EQ(d.rule_id, Id("cat"));
  EXPECT_EQ(d.argv[0], "/usr/bin/cat");
  EXPECT_EQ(d.resolved_executable, "/usr/bin/cat");
}

TEST_F(CommandRulesTest, DeniesByDefault) {
  auto d = D({"rm", "-rf", "/"});
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.rule_id, "default_deny");
  EXPECT_EQ(d.reason, "rule:default_deny: no grant of 't' names executable '/usr/bin/rm'");
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
  EXPECT_FALSE(D({"git", "--git-dir=.git", "diff"}).allowed);  // chooses the repository
  EXPECT_FALSE(D({"git", "push"}).allowed);
  EXPECT_FALSE(D({"git"}).allowed);
  EXPECT_FALSE(D({"git", "-c", "core.pager=rm", "log"}).allowed);
  EXPECT_FALSE(D({"git", "-ccore.pager=rm", "log"}).allowed);
  EXPECT_FALSE(D({"git", "--config-env=core.pager=X", "log"}).allowed);
  EXPECT_FALSE(D({"git", "--exec-path=/tmp", "log"}).allowed);
  EXPECT_FALSE(D({"git", "--weird", "log"}).allowed);
  auto d = D({"git", "-C", "x", "push"});
  EXPECT_TRUE(absl::StartsWith(
      d.reason, "rule:" + Id("git-read") + ": '/usr/bin/git': subcommand 'push' is not one of"))
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

TEST_F(CommandRulesTest, OperandGlobs) {
  EXPECT_TRUE(D({"python3", "tests/x.py"}).allowed);
  auto d = D({"python3", "evil.py"});
  EXPECT_FALSE(d.allowed);
  EXPECT_TRUE(absl::StrContains(d.reason, "operand 'evil.py' (/workspace/evil.py) matches none of"))
      << d.reason;
}

TEST_F(CommandRulesTest, AllowedFlagsAndMaxArgs) {
  policy::CommandRule ls = Rule("/usr/bin/ls");
  ls.has_allowed_flags = true;
  ls.allowed_flags = {"-l", "-a", "--color"};
  ls.max_args = 3;
  rules_ = {{"ls", ls}};
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
  std::vector<policy::CommandRule> rules;
  for (const char* w : {"env", "sh", "find", "xargs", "git", "cat", "timeout", "nice", "tar",
                        "sed", "awk", "busybox", "perl"}) {
    policy::CommandRule rule = Rule(std::string("/usr/bin/") + w);
    rule.subcommands = {"status"};
    rule.forbidden_flags = {"-x"};
    rule.operand_globs = {"/**"};
    rules.push_back(rule);
  }
  auto snapshot = policy::LoadCommandPolicy("t", rules);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  FakeResolver resolver;
  const PolicyCommandRules policy_rules(*snapshot, "t", resolver);
  const std::vector<std::string> vocab = {
      "env", "sh", "-c", "find", "-exec", ";", "+", "xargs", "-I", "{}", "git", "-C", "--",
      "cat", "timeout", "5", "nice", "-n", "'", "\"", "\\", "$", "a b", "-S", "PATH=x",
      "=", "", "--x=", "-", "../..", "/workspace/cat", "\n", std::string(1, '\0'),
      "tar", "-I", "--to-command=", "sed", "e", "s/x/y/e", "awk", "system(\"", "|", "/",
      "busybox", "git-log", "--eof", "-l", "\\_", "\\c", "#", "${X}", "perl", "-e",
      "-execdir", "-ok", "{} +", "[", "]", "--git-dir"};
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
    CommandDecision d = DecideCommand(policy_rules, argv, "/workspace", resolver);
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

// Issue 17: argv-parsing bypasses of the executable-aware rules, each reproduced.
namespace gantry::sandbox {
namespace {

class CommandRulesBypassTest : public CommandRulesTest {
 protected:
  // Denied, and the reason quotes rule `id` ("rule:<id>: ...").
  void ExpectDenied(const std::vector<std::string>& argv, const std::string& id) {
    CommandDecision d = D(argv);
    std::string shown;
    for (const auto& a : argv) shown += "[" + a + "] ";
    EXPECT_FALSE(d.allowed) << shown;
    EXPECT_TRUE(absl::StartsWith(d.reason, "rule:" + Id(id) + ":")) << shown << "-> " << d.reason;
  }
  void ExpectAllowed(const std::vector<std::string>& argv) {
    CommandDecision d = D(argv);
    std::string shown;
    for (const auto& a : argv) shown += "[" + a + "] ";
    EXPECT_TRUE(d.allowed) << shown << "-> " << d.reason;
  }
};

// 1. GNU xargs: --eof, --replace, --max-lines (-e, -i, -l) take a value only attached
// with '=' (or, short, in the same word); `--eof id` leaves `id` as the command.
TEST_F(CommandRulesBypassTest, XargsOptionalArgumentsAreOnlyAttached) {
  ExpectDenied({"xargs", "--eof", "id", "cat"}, "default_deny");
  EXPECT_EQ(D({"xargs", "--eof", "id", "cat"}).resolved_executable, "/usr/bin/id");
  ExpectDenied({"xargs", "--replace", "id", "cat"}, "default_deny");
  ExpectDenied({"xargs", "-e", "id", "cat"}, "default_deny");
  ExpectDenied({"xargs", "-l", "id", "cat"}, "default_deny");
  ExpectDenied({"xargs", "-i", "id", "cat"}, "default_deny");
  ExpectAllowed({"xargs", "--eof=id", "cat"});
  ExpectAllowed({"xargs", "-eEND", "cat"});
  ExpectAllowed({"xargs", "-E", "END", "cat"});
  ExpectAllowed({"xargs", "--replace=R", "cat", "R"});
  ExpectAllowed({"xargs", "-i", "cat", "{}"});
}

// 2. `xargs --max-lines rm cat victim.txt` runs rm (the same root cause).
TEST_F(CommandRulesBypassTest, XargsMaxLinesWithoutValueRunsTheNextWord) {
  ExpectDenied({"xargs", "--max-lines", "rm", "cat", "victim.txt"}, "default_deny");
  EXPECT_EQ(D({"xargs", "--max-lines", "rm", "cat", "victim.txt"}).resolved_executable,
            "/usr/bin/rm");
  ExpectAllowed({"xargs", "--max-lines=2", "cat"});
  ExpectAllowed({"xargs", "-l2", "cat"});
  ExpectAllowed({"xargs", "-L", "2", "cat"});
}

// 3. env -S splits on \_ (and knows \t \n \# \$ \c \\ \" \' and ${VAR}).
TEST_F(CommandRulesBypassTest, EnvSplitStringFollowsGnuEscapes) {
  ExpectDenied({"env", "-S", "git -C .\\_-c\\_\"alias.x=!id;:\"\\_x status"}, "git-read");
  EXPECT_TRUE(absl::StrContains(
      D({"env", "-S", "git -C .\\_-c\\_\"alias.x=!id;:\"\\_x status"}).reason, "-c"));
}

// 4. git options that choose the repository (and so its config: core.fsmonitor, ...).
TEST_F(CommandRulesBypassTest, GitRepositoryChoosingOptionsAreDenied) {
  ExpectDenied({"git", "--git-dir=evil", "--work-tree=.", "status"}, "git-read");
  ExpectDenied({"git", "--git-dir", "evil", "status"}, "git-read");
  ExpectDenied({"git", "--work-tree=.", "status"}, "git-read");
  ExpectDenied({"git", "--bare", "status"}, "git-read");
  ExpectDenied({"git", "--namespace=x", "status"}, "git-read");
  ExpectDenied({"git", "--git-d=evil", "status"}, "git-read");
  ExpectDenied({"git", "--work=.", "status"}, "git-read");
  ExpectDenied({"env", "GIT_DIR=evil", "git", "status"}, "env");
  ExpectDenied({"env", "GIT_WORK_TREE=.", "git", "status"}, "env");
  ExpectAllowed({"git", "-C", "sub", "status"});
}

// 5. A multi-call name (git-<cmd>) is decided at every level of the chain.
TEST_F(CommandRulesBypassTest, MultiCallNamesAreDecidedAtEveryLevel) {
  resolver_.links["/workspace/git-difftool"] = "/usr/bin/git";
  resolver_.links["/workspace/git-status"] = "/usr/bin/git";
  ExpectDenied({"env", "./git-difftool", "diff", "-x", "CMD"}, "git-read");
  EXPECT_TRUE(absl::StrContains(D({"env", "./git-difftool", "diff", "-x", "CMD"}).reason,
                                "subcommand 'difftool'"));
  ExpectDenied({"nohup", "./git-difftool", "diff", "-x", "CMD"}, "git-read");
  ExpectDenied({"./git-difftool", "diff", "-x", "CMD"}, "git-read");
  ExpectAllowed({"env", "./git-status"});
}

// 6. find: '+' ends -exec/-execdir only right after "{}"; -ok/-okdir end only at ';'.
TEST_F(CommandRulesBypassTest, FindPlusEndsExecOnlyAfterBraces) {
  Named("cat").operand_globs = {"/workspace/**"};
  ExpectDenied({"find", ".", "-exec", "cat", "+", "/usr/lib/os-release", ";"}, "cat");
  ExpectDenied({"find", ".", "-execdir", "cat", "+", "/usr/lib/os-release", ";"}, "cat");
  ExpectDenied({"find", ".", "-ok", "cat", "{}", "+", "/usr/lib/os-release", ";"}, "cat");
  ExpectAllowed({"find", ".", "-exec", "cat", "{}", "+"});
  ExpectAllowed({"find", ".", "-exec", "cat", "{}", "+", "-name", "x"});
  ExpectAllowed({"find", ".", "-ok", "cat", "{}", ";"});
}


// More attempts in the same families; each is denied where the rules do not grant what
// would finally run, with the deciding rule's id, and the legitimate forms still pass.
class CommandRulesAttemptTest : public CommandRulesBypassTest {
 protected:
  CommandRulesAttemptTest() {
    resolver_.links["/bin/sh"] = "/usr/bin/sh";  // awk, sed and tar run /bin/sh -c
    Add("awk", Rule("/usr/bin/awk"));
    Add("tar", Rule("/usr/bin/tar"));
    policy::CommandRule perl = Rule("/usr/bin/perl");
    perl.operand_globs = {"/workspace/scripts/*.pl"};
    Add("perl", perl);
    policy::CommandRule busybox = Rule("/usr/bin/busybox");
    busybox.subcommands = {"cat", "ls", "env", "sh"};
    Add("busybox", busybox);
    Add("flock", Rule("/usr/bin/flock"));
  }
};

TEST_F(CommandRulesAttemptTest, EnvSplitStringUnits) {
  using V = std::vector<std::string>;
  auto split = [](const std::string& t) {
    auto w = SplitEnvSplitString(t);
    return w.ok() ? *w : V{"<denied>"};
  };
  EXPECT_EQ(split("a\\_b"), (V{"a", "b"}));
  EXPECT_EQ(split("\"a\\_b\""), (V{"a b"}));
  EXPECT_EQ(split("'a\\_b'"), (V{"a\\_b"}));
  EXPECT_EQ(split("a\\tb"), (V{"a\tb"}));
  EXPECT_EQ(split("a\\cb c"), (V{"a"}));
  EXPECT_EQ(split("\\#x #y"), (V{"#x"}));
  EXPECT_EQ(split("a#b"), (V{"a#b"}));
  EXPECT_EQ(split("'' x"), (V{"", "x"}));
  EXPECT_EQ(split("\"a'b\" 'c\"d'"), (V{"a'b", "c\"d"}));
  EXPECT_EQ(split("  \t "), V{});
  for (const char* bad : {"${HOME}", "$HOME", "a\\q", "a\\", "\"\\c\"", "'x", "'a\\zb'"}) {
    EXPECT_EQ(split(bad), V{"<denied>"}) << bad;
  }
}

// env -S text may hold options, assignments and another -S: env reads them again.
TEST_F(CommandRulesAttemptTest, EnvSplitStringOptionsAndAssignments) {
  ExpectDenied({"env", "-S", "PATH=/workspace cat"}, "env");
  ExpectDenied({"env", "-S", "-i LD_PRELOAD=/workspace/x.so cat"}, "env");
  ExpectDenied({"env", "-S", "-S\\_rm\\_x"}, "default_deny");
  ExpectDenied({"env", "-vS", "rm x"}, "default_deny");
  ExpectDenied({"env", "-S", "cat ${HOME}"}, "env");
  ExpectDenied({"env", "-S", "git\\_-c\\_core.pager=id\\_log"}, "git-read");
  ExpectAllowed({"env", "-S", "-u X cat", "a.txt"});
  ExpectAllowed({"env", "-Scat a.txt"});
  ExpectAllowed({"env", "--split-string=cat\\_a.txt"});
  ExpectAllowed({"env", "./x=y", "cat"});  // any word with '=' is an assignment to env
  auto d = D({"env", "-S", "-i A=1 cat 'a b'"});
  EXPECT_TRUE(d.allowed) << d.reason;
  EXPECT_EQ(d.resolved_executable, "/usr/bin/cat");
}

// Interpreters: inline code is an operand, attached or not.
TEST_F(CommandRulesAttemptTest, InterpreterInlineCodeIsAnOperand) {
  ExpectDenied({"python3", "-c", "import os; os.system('id')"}, "python");
  ExpectDenied({"python3", "-cimport os; os.system('id')"}, "python");
  ExpectDenied({"python3", "-Icimport os; os.system('id')"}, "python");
  ExpectDenied({"python3", "-mhttp.server"}, "python");
  ExpectDenied({"perl", "-e", "system('id')"}, "perl");
  ExpectDenied({"perl", "-esystem('id')"}, "perl");
  ExpectDenied({"perl", "-nesystem('id')", "scripts/a.pl"}, "perl");
  ExpectDenied({"perl", "-Mstrict;system('id')", "scripts/a.pl"}, "perl");
  ExpectDenied({"perl", "-lnesystem('id')", "scripts/a.pl"}, "perl");
  ExpectDenied({"perl", "-0777esystem('id')", "scripts/a.pl"}, "perl");
  ExpectDenied({"perl", "-lesystem('id')", "scripts/a.pl"}, "perl");
  ExpectAllowed({"python3", "-B", "tests/a.py"});
  ExpectAllowed({"perl", "-w", "scripts/a.pl"});
  ExpectAllowed({"perl", "-lnw", "scripts/a.pl"});
}

// awk's system() and pipes run /bin/sh -c: a plain literal is decided as that command.
TEST_F(CommandRulesAttemptTest, AwkSystemAndPipes) {
  ExpectDenied({"awk", "BEGIN{system(\"id\")}"}, "default_deny");
  EXPECT_EQ(D({"awk", "BEGIN{system(\"id\")}"}).resolved_executable, "/usr/bin/id");
  ExpectDenied({"awk", "BEGIN { system (\"rm -rf x\") }"}, "default_deny");
  ExpectDenied({"awk", "{x=\"id\"; system(x)}"}, "awk");
  ExpectDenied({"awk", "{print | \"id\"}"}, "awk");
  ExpectDenied({"awk", "BEGIN{\"id\" | getline x}"}, "awk");
  ExpectDenied({"awk", "{ a = 1 / 1; system(\"id\"); b = 1 / 1 }"}, "default_deny");
  ExpectDenied({"awk", "{ a = $1 / 2 } /x/ { print \"a|b\" | \"sh\" }"}, "awk");
  ExpectDenied({"awk", "-f", "prog.awk", "a.txt"}, "awk");
  ExpectDenied({"awk", "@load \"x\"; BEGIN{}"}, "awk");
  ExpectDenied({"awk", "/[/]/ { print }"}, "awk");
  ExpectDenied({"awk", "/[]\"/ ]/ ; BEGIN { system(\"id\") ; x = \"a\" }"}, "awk");
  ExpectAllowed({"awk", "/a|b/ || $2 == \"x\" { print $1 / 2 }", "a.txt"});
  ExpectAllowed({"awk", "-F:", "-v", "n=1", "{ print $n > \"out.txt\" }", "a.txt"});
  ExpectAllowed({"awk", "BEGIN{system(\"cat a.txt\")}"});
}

// sed's e command and s///e flag run commands.
TEST_F(CommandRulesAttemptTest, SedExecuteCommand) {
  ExpectDenied({"sed", "1e id", "a.txt"}, "default_deny");
  ExpectDenied({"sed", "-n", "/x/{p;e id\n}", "a.txt"}, "default_deny");
  ExpectDenied({"sed", "s/x/id/e", "a.txt"}, "sed");
  ExpectDenied({"sed", "s|x|id|ge", "a.txt"}, "sed");
  ExpectDenied({"sed", "-e", "e", "a.txt"}, "sed");
  ExpectDenied({"sed", "a.txt", "--expression=1e id"}, "default_deny");  // sed permutes
  ExpectDenied({"sed", "-f", "script.sed", "a.txt"}, "sed");
  ExpectDenied({"sed", "1q;x e", "a.txt"}, "sed");
  ExpectAllowed({"sed", "-n", "s/a/b/gp;y/ab/cd/;$=", "a.txt"});
  ExpectAllowed({"sed", "-E", "/^#/d;s,a/b,c,2", "a.txt"});
  ExpectAllowed({"sed", "--sandbox", "-f", "script.sed", "a.txt"});
  ExpectAllowed({"sed", "1e cat a.txt", "a.txt"});
}

// tar's options that run a command through /bin/sh -c.
TEST_F(CommandRulesAttemptTest, TarCommandOptions) {
  ExpectDenied({"tar", "-xf", "a.tar", "--to-command=id"}, "default_deny");
  ExpectDenied({"tar", "-I", "id", "-xf", "a.tar"}, "default_deny");
  ExpectDenied({"tar", "-xIid", "-f", "a.tar"}, "default_deny");
  ExpectDenied({"tar", "xfI", "a.tar", "id"}, "default_deny");  // old-style options
  ExpectDenied({"tar", "-cf", "x.tar", "--checkpoint=1", "--checkpoint-action=exec=id", "."},
               "default_deny");
  ExpectDenied({"tar", "--use-compress-prog=id", "-cf", "x.tar", "."}, "default_deny");
  ExpectDenied({"tar", "-cf", "x.tar", "--info-script", "id", "."}, "default_deny");
  ExpectDenied({"tar", "--rsh-command=/workspace/x", "-cf", "h:x.tar", "."}, "tar");
  ExpectDenied({"tar", "-cf", "host:x.tar", "."}, "tar");
  ExpectDenied({"tar", "--checkpoint", "--to-command=id", "-xf", "a.tar"}, "default_deny");
  ExpectDenied({"tar", "-f", "--to-command=id", "-x"}, "default_deny");  // denies more
  ExpectDenied({"tar", "-cf", "x.tar", "-T", "list.txt"}, "tar");  // lines may be options
  ExpectDenied({"tar", "-cf", "x.tar", "--files-from=list.txt"}, "tar");
  ExpectAllowed({"tar", "-cf", "x.tar", "--verbatim-files-from", "-T", "list.txt"});
  ExpectAllowed({"tar", "-xzf", "a.tgz"});
  ExpectAllowed({"tar", "tvf", "a.tar"});
  ExpectAllowed({"tar", "--checkpoint-action=dot", "-cf", "x.tar", "."});
  ExpectAllowed({"tar", "-xf", "a.tar", "--to-command=cat"});
  ExpectAllowed({"tar", "--force-local", "-cf", "c:x.tar", "."});
}

// git's configuration from the command line and from the environment.
TEST_F(CommandRulesAttemptTest, GitConfigurationThatRunsPrograms) {
  ExpectDenied({"git", "-c", "core.pager=id", "log"}, "git-read");
  ExpectDenied({"git", "-c", "core.sshCommand=id", "status"}, "git-read");
  ExpectDenied({"git", "-ccore.fsmonitor=id", "status"}, "git-read");
  ExpectDenied({"git", "--config-env=diff.external=X", "diff"}, "git-read");
  ExpectDenied({"git", "--config-env", "core.pager=X", "log"}, "git-read");
  ExpectDenied({"git", "--exec-path=/workspace", "status"}, "git-read");
  ExpectDenied({"env", "HOME=/workspace", "git", "status"}, "env");
  ExpectDenied({"env", "XDG_CONFIG_HOME=/workspace", "git", "status"}, "env");
  ExpectDenied({"env", "GIT_CONFIG_GLOBAL=/workspace/c", "git", "status"}, "env");
  ExpectDenied({"env", "GIT_EXTERNAL_DIFF=id", "git", "diff"}, "env");
  ExpectAllowed({"git", "--no-pager", "-C", "sub", "log", "-n", "3"});
}

// find's other forms: -execdir, -ok, -okdir, several actions.
TEST_F(CommandRulesAttemptTest, FindExecdirAndOk) {
  ExpectDenied({"find", ".", "-execdir", "id", ";"}, "default_deny");
  ExpectDenied({"find", ".", "-ok", "id", ";"}, "default_deny");
  ExpectDenied({"find", ".", "-okdir", "rm", "{}", ";"}, "default_deny");
  ExpectDenied({"find", ".", "-exec", "cat", "{}", "+", "-exec", "id", ";"}, "default_deny");
  ExpectDenied({"find", ".", "-ok", "cat", "{}", "+"}, "find");  // no ';'
  ExpectDenied({"find", ".", "-exec", "cat", "x{}", "+"}, "find");  // find refuses it
  ExpectDenied({"find", ".", "-execdir", "./cat", ";"}, "find");
  ExpectDenied({"find", ".", "-exec", "sh", "-c", "cat {}", ";"}, "sh");
  ExpectAllowed({"find", ".", "-name", "*.c", "-execdir", "cat", "{}", "+"});
  ExpectAllowed({"find", ".", "-exec", "cat", "{}", ";", "-exec", "ls", "{}", "+"});
}

// Multi-call names: busybox applets and git-<cmd>, through links and wrappers.
TEST_F(CommandRulesAttemptTest, BusyboxAndGitMultiCallNames) {
  resolver_.links["/workspace/sh"] = "/usr/bin/busybox";
  resolver_.links["/workspace/ls"] = "/usr/bin/busybox";
  resolver_.links["/workspace/rm"] = "/usr/bin/busybox";
  resolver_.links["/workspace/vi"] = "/usr/bin/busybox";
  resolver_.links["/workspace/git-log"] = "/usr/bin/git";
  resolver_.links["/workspace/git-push"] = "/usr/bin/git";
  ExpectDenied({"env", "./sh", "-c", "id"}, "default_deny");
  ExpectDenied({"./sh", "-c", "id"}, "default_deny");
  ExpectDenied({"env", "./rm", "-rf", "x"}, "busybox");
  ExpectDenied({"busybox", "rm", "x"}, "busybox");
  ExpectDenied({"busybox", "env", "rm", "x"}, "default_deny");
  ExpectDenied({"env", "./vi", "a.txt"}, "default-deny");  // an applet not modelled
  ExpectDenied({"busybox", "--install", "/workspace"}, "default-deny");
  ExpectDenied({"xargs", "./git-push"}, "git-read");
  ExpectDenied({"find", ".", "-exec", "/workspace/git-push", ";"}, "git-read");
  auto ls = D({"./ls", "-l"});
  EXPECT_TRUE(ls.allowed) << ls.reason;
  EXPECT_EQ(ls.argv, (std::vector<std::string>{"/usr/bin/busybox", "ls", "-l"}));
  ExpectAllowed({"env", "./sh", "-c", "cat a.txt"});
  ExpectAllowed({"busybox", "cat", "a.txt"});
  auto log = D({"./git-log", "-n", "1"});
  EXPECT_TRUE(log.allowed) << log.reason;
  EXPECT_EQ(log.argv, (std::vector<std::string>{"/usr/bin/git", "log", "-n", "1"}));
  ExpectAllowed({"env", "./git-log", "-n", "1"});
}

// A busybox installed as hard links: a link run under another applet's name is that
// applet, decided as the program of that name.
TEST_F(CommandRulesAttemptTest, BusyboxHardLinkUnderAnotherName) {
  class LinkedBusybox : public FakeResolver {
   public:
    std::string MultiCallKind(absl::string_view resolved) const override {
      return resolved == "/usr/bin/ls" ? "busybox" : FakeResolver::MultiCallKind(resolved);
    }
  } resolver;
  resolver.links["/workspace/x"] = "/usr/bin/ls";
  auto d = D({"./x", "-c", "id"}, resolver);
  EXPECT_FALSE(d.allowed);
  EXPECT_TRUE(absl::StartsWith(d.reason, "rule:default_deny: no grant of 't' names executable '/usr/bin/x'")) << d.reason;
  d = D({"ls", "-l"}, resolver);
  EXPECT_TRUE(d.allowed) << d.reason;
}

// The environment: loader, lookup and start-up variables, in env and in xargs.
TEST_F(CommandRulesAttemptTest, LoaderAndPathVariables) {
  ExpectDenied({"env", "LD_PRELOAD=/workspace/x.so", "cat"}, "env");
  ExpectDenied({"env", "LD_AUDIT=/workspace/x.so", "cat"}, "env");
  ExpectDenied({"env", "PATH=.", "cat"}, "env");
  ExpectDenied({"env", "-i", "PATH=/workspace", "cat"}, "env");
  ExpectDenied({"env", "BASH_ENV=/workspace/x", "bash", "-c", "cat"}, "env");
  ExpectDenied({"env", "TAR_OPTIONS=--to-command=id", "tar", "-xf", "a.tar"}, "env");
  ExpectDenied({"env", "PYTHONPATH=/workspace", "python3", "tests/a.py"}, "env");
  ExpectDenied({"env", "PYTHONPYCACHEPREFIX=/workspace/untrusted", "python3", "tests/a.py"}, "env");
  ExpectDenied({"env", "PYTHONINSPECT=1", "python3", "tests/a.py"}, "env");
  ExpectDenied({"env", "PERL_UNICODE=1", "perl", "tests/a.pl"}, "env");
  ExpectDenied({"xargs", "--process-slot-var=PATH", "sh", "-c", "cat"}, "xargs");
  ExpectDenied({"xargs", "--process-slot-var", "BASH_ENV", "bash", "-c", "cat"}, "xargs");
  EXPECT_TRUE(IsDeniedEnvName("HOME"));
  EXPECT_TRUE(IsDeniedEnvName("LUA_INIT"));
  EXPECT_FALSE(IsDeniedEnvName("LANGUAGE"));
  ExpectAllowed({"env", "TERM=dumb", "LC_ALL=C", "cat", "a.txt"});
  ExpectAllowed({"xargs", "--process-slot-var=SLOT", "cat"});
}

// timeout's and nice's option grammars: every form still finds the command.
TEST_F(CommandRulesAttemptTest, TimeoutAndNiceGrammar) {
  for (std::vector<std::string> argv : std::vector<std::vector<std::string>>{
           {"timeout", "--signal", "KILL", "5", "id"},
           {"timeout", "-sKILL", "5", "id"},
           {"timeout", "--sig=KILL", "5", "id"},
           {"timeout", "-vs", "KILL", "5", "id"},
           {"timeout", "--kill-after", "1", "5", "id"},
           {"timeout", "-k1", "5", "id"},
           {"timeout", "--foreground", "--", "5", "id"},
           {"nice", "-n", "5", "id"},
           {"nice", "-n5", "id"},
           {"nice", "-n", "-5", "id"},
           {"nice", "--adjustment=5", "id"},
           {"nice", "--adj", "5", "id"},
           {"nice", "-5", "id"},
           {"nice", "--5", "-n", "1", "id"},
           {"stdbuf", "-oL", "-e", "0", "id"},
           {"setsid", "-fw", "id"},
       }) {
    ExpectDenied(argv, "default_deny");
    EXPECT_EQ(D(argv).resolved_executable, "/usr/bin/id") << argv[0] << " " << argv[1];
  }
  ExpectDenied({"timeout", "--bogus", "5", "cat"}, "timeout");
  ExpectDenied({"timeout", "--sig"}, "timeout");
  ExpectAllowed({"timeout", "-s", "KILL", "5", "cat", "a.txt"});
  ExpectAllowed({"timeout", "--preserve-status", "1", "cat"});
  ExpectAllowed({"nice", "-n", "5", "cat", "a.txt"});
}

// xargs' input: appended words must not name a program or reach options that run one;
// a replace string must not be substituted into what a wrapper runs.
TEST_F(CommandRulesAttemptTest, XargsInputCannotChooseWhatRuns) {
  ExpectDenied({"xargs", "env"}, "env");
  ExpectDenied({"xargs", "env", "-i", "A=1"}, "env");
  ExpectDenied({"xargs", "xargs"}, "xargs");
  ExpectDenied({"xargs", "find", "."}, "find");
  ExpectDenied({"xargs", "git", "log"}, "git-read");
  ExpectDenied({"xargs", "sed", "s/a/b/"}, "sed");
  ExpectDenied({"xargs", "tar", "-xf", "a.tar"}, "tar");
  ExpectDenied({"xargs", "perl", "-e", "print 1"}, "perl");  // input would be its options
  ExpectAllowed({"xargs", "python3", "tests/a.py"});     // input is the script's arguments
  ExpectDenied({"xargs", "nice", "env"}, "env");
  ExpectDenied({"xargs", "-I", "cat", "nice", "cat"}, "default-deny");
  ExpectDenied({"xargs", "-I", "5", "nice", "-n", "5", "cat"}, "nice");
  ExpectDenied({"xargs", "-I", "cat", "env", "nice", "cat"}, "default-deny");
  ExpectDenied({"xargs", "-I", "X", "python3", "-c", "X"}, "python");
  ExpectDenied({"xargs", "-I", "X", "sh", "-c", "cat X"}, "sh");
  ExpectDenied({"xargs", "-I", "X", "env", "-S", "cat X"}, "env");
  ExpectDenied({"xargs", "-I", "X", "git", "X", "status"}, "git-read");
  ExpectDenied({"xargs", "-I", "X", "-n", "2", "env"}, "env");  // -n 2 ends replace mode
  ExpectDenied({"xargs", "--bogus", "cat"}, "xargs");
  ExpectDenied({"xargs", "--max", "1", "cat"}, "xargs");  // ambiguous
  ExpectAllowed({"xargs", "cat"});
  ExpectAllowed({"xargs", "-0", "-n1", "echo"});
  ExpectAllowed({"xargs", "--max-a=2", "cat"});
  ExpectAllowed({"xargs", "-I", "X", "cat", "X"});
  ExpectAllowed({"xargs", "-I", "X", "-n", "1", "env", "cat", "X"});
  ExpectAllowed({"xargs", "env", "cat"});
  ExpectAllowed({"xargs", "sh", "-c", "cat a.txt"});
}

// Programs that run what their arguments say, without a model here, and shells the
// rules cannot read.
TEST_F(CommandRulesAttemptTest, UnmodelledRunners) {
  ExpectDenied({"flock", "x", "id"}, "flock");
  ExpectDenied({"flock", "x", "cat"}, "flock");
}

}  // namespace
}  // namespace gantry::sandbox

// Red-team round 2: operand globs were matched lexically only, and git options that
// become the command (or print and exit) passed the subcommand check.
#include <stdlib.h>
#include <unistd.h>

#include <fstream>

#include "policy/policy_decide.h"
#include "policy/policy_loader.h"
#include "sandbox-svc/policy_command_rules.h"

namespace gantry::sandbox {
namespace {

// A workspace under $TEST_TMPDIR with links out of it, read through the real
// SandboxViewResolver (no root needed: only the host's /usr is read).
class OperandLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(access("/usr/lib/os-release", R_OK), 0) << "this test reads /usr/lib/os-release";
    const char* tmp = getenv("TEST_TMPDIR");
    std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/operand-links-XXXXXX";
    ASSERT_NE(mkdtemp(dir.data()), nullptr);
    ws_ = dir;
    ASSERT_EQ(mkdir((ws_ + "/out").c_str(), 0755), 0);
    ASSERT_EQ(mkdir((ws_ + "/out/sub").c_str(), 0755), 0);
    std::ofstream(ws_ + "/out/real.txt") << "ok\n";
    for (const auto& [link, target] : std::vector<std::pair<std::string, std::string>>{
             {"out/os2", "/usr/lib/os-release"},
             {"out/lib", "/usr/lib"},
             {"out/rel", "../../../usr/lib/os-release"},  // '..' stops at the root
             {"out/inner", "/workspace/out/real.txt"},
             {"out/inner-rel", "real.txt"},
             {"out/subdir", "sub"},
             {"out/dangling", "/workspace/out/later"},
             {"out/home", "/home/someone/.ssh/id_rsa"},
             {"out/tmp", "/tmp/x"},
             {"out/loop", "loop"}}) {
      ASSERT_EQ(symlink(target.c_str(), (ws_ + "/" + link).c_str()), 0) << link;
    }
    auto loaded = policy::LoadPolicyText(
        testing::PolicyGranting(
            "harness", {"/usr/bin/env"},
            "      - {executable: /usr/bin/cat, operands: {globs: [\"/workspace/**\"]}}\n"
            "      - {executable: /usr/bin/touch, operands: {globs: [\"/workspace/out/**\"]}}\n"
            "      - {executable: /usr/bin/git,"
            " operands: {globs: [\"/workspace\", \"/workspace/**\"]}}\n"),
        "policy.yaml");
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    snapshot_ = *loaded;
  }
  CommandDecision D(const std::vector<std::string>& argv, const std::string& cwd = "/workspace") {
    SandboxViewResolver resolver(ws_);
    return DecideCommand(PolicyCommandRules(snapshot_, "harness", resolver), argv, cwd, resolver);
  }
  void ExpectDenied(const std::vector<std::string>& argv, const std::string& cwd = "/workspace",
                    const std::string& why = "") {
    CommandDecision d = D(argv, cwd);
    EXPECT_FALSE(d.allowed) << argv.back() << " in " << cwd;
    EXPECT_TRUE(absl::StrContains(d.reason, why)) << argv.back() << " -> " << d.reason;
  }
  void ExpectAllowed(const std::vector<std::string>& argv, const std::string& cwd = "/workspace") {
    CommandDecision d = D(argv, cwd);
    EXPECT_TRUE(d.allowed) << argv.back() << " in " << cwd << " -> " << d.reason;
  }
  std::string ws_;
  std::shared_ptr<const policy::Snapshot> snapshot_;
};

// `cat /workspace/out/os2` (os2 -> /usr/lib/os-release) read a host file past
// "/workspace/**": the real path must match as well as the lexical one.
TEST_F(OperandLinkTest, AnOperandsRealPathMustMatchTheGlobsToo) {
  ExpectDenied({"cat", "/workspace/out/os2"}, "/workspace",
               "resolves to '/usr/lib/os-release', which matches none of [/workspace/**]");
  ExpectDenied({"cat", "/workspace/out/lib/os-release"});
  ExpectDenied({"cat", "out/os2"});
  ExpectDenied({"cat", "os2"}, "/workspace/out");
  ExpectDenied({"cat", "out/rel"});
  ExpectDenied({"cat", "os-release"}, "/workspace/out/lib");  // a linked working directory
  // The kernel reads '..' after a link in the link's target (/usr/lib/.. is /usr).
  ExpectDenied({"cat", "/workspace/out/lib/../lib/os-release"});
  ExpectDenied({"cat", "/bin/../workspace/out/real.txt"});  // /usr/workspace/...
  ExpectDenied({"env", "cat", "/workspace/out/os2"});
  ExpectDenied({"git", "-C", "out/lib", "status"});  // -C's directory is an operand
  ExpectAllowed({"cat", "/workspace/out/real.txt", "out/inner", "out/inner-rel"});
  ExpectAllowed({"cat", "real.txt"}, "/workspace/out/subdir/..");  // subdir/.. is out
  ExpectAllowed({"git", "-C", "out/subdir", "status"});
}

// A link that leads nowhere in the sandbox is denied whatever its lexical path: a link
// (or file) made there later could lead anywhere; so is a path the view cannot see.
TEST_F(OperandLinkTest, DanglingAndUnseenLinksAreDenied) {
  ExpectDenied({"cat", "/workspace/out/dangling"}, "/workspace", "does not exist in the sandbox");
  ExpectDenied({"touch", "/workspace/out/dangling"});
  ExpectDenied({"cat", "/workspace/out/home"}, "/workspace", "/home");
  ExpectDenied({"cat", "/workspace/out/tmp"}, "/workspace", "/tmp");
  ExpectDenied({"cat", "/workspace/out/loop"}, "/workspace", "more than 40 symbolic links");
}

// Output files that do not exist yet: the lexical path, and the real path of their
// deepest existing directory joined with the rest.
TEST_F(OperandLinkTest, NewFilesAreReadBeneathTheirRealDirectory) {
  ExpectAllowed({"touch", "/workspace/out/new.txt", "out/sub/new", "out/a/b/c"});
  ExpectAllowed({"touch", "new"}, "/workspace/out/subdir");
  ExpectDenied({"touch", "/workspace/out/lib/new"}, "/workspace",
               "resolves to '/usr/lib/new'");
  ExpectDenied({"touch", "/workspace/out/lib/a/b"});
  // A directory made on the way and left with '..' is walked again from there.
  ExpectDenied({"touch", "/workspace/out/none/../lib/new"});
  ExpectAllowed({"touch", "/workspace/out/none/../new"});
}

// `gantry policy explain` has no file system: the policy alone stays lexical.
TEST_F(OperandLinkTest, ThePolicyAloneStaysLexical) {
  policy::PolicyRequest r;
  r.principal = "harness";
  r.command_cwd = "/workspace";
  r.commands = {{"/usr/bin/cat", "/workspace/out/os2"}};
  EXPECT_EQ(policy::Decide(*snapshot_, r).verdict, policy::Verdict::kAllow);
}

// git.c: --version/-v and --help/-h end git's options and become the command
// (`git --version status` runs `git version`); --exec-path, --html-path, --man-path,
// --info-path and --list-cmds= print and exit.
TEST_F(CommandRulesTest, GitOptionsThatBecomeTheCommand) {
  for (std::vector<std::string> argv : std::vector<std::vector<std::string>>{
           {"git", "--version", "status"},
           {"git", "-v", "status"},
           {"git", "--help", "status"},
           {"git", "-h", "status"},
           {"git", "-p", "--version", "status"},
           {"git", "-C", "sub", "--no-pager", "--help", "log"},
           {"git", "--html-path", "status"},
           {"git", "--man-path", "status"},
           {"git", "--info-path", "status"},
           {"git", "--exec-path", "status"},
           {"git", "--list-cmds=main", "status"},
       }) {
    CommandDecision d = D(argv);
    EXPECT_FALSE(d.allowed) << argv[1] << " " << argv.back();
  }
  EXPECT_TRUE(absl::StrContains(D({"git", "--version", "status"}).reason,
                                "subcommand 'version' is not one of"))
      << D({"git", "--version", "status"}).reason;
  EXPECT_TRUE(absl::StrContains(D({"git", "-h", "status"}).reason,
                                "subcommand 'help' is not one of"));
  EXPECT_TRUE(absl::StrContains(D({"git", "--html-path", "status"}).reason,
                                "prints and exits"));
  // Decided as the command they become.
  policy::CommandRule git = Rule("/usr/bin/git");
  git.subcommands = {"version", "help"};
  rules_ = {{"git-meta", git}};
  EXPECT_TRUE(D({"git", "--version"}).allowed);
  EXPECT_TRUE(D({"git", "-p", "-v"}).allowed);
  EXPECT_TRUE(D({"git", "--help", "status"}).allowed);
  EXPECT_FALSE(D({"git", "--html-path"}).allowed);
}

}  // namespace
}  // namespace gantry::sandbox
