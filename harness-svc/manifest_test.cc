#include "harness-svc/manifest.h"

#include <random>

#include "gtest/gtest.h"

namespace gantry::harness {
namespace {

constexpr char kGood[] = R"(version: 1
name: repo-summary
goal: Summarise the repository in three bullets.
workspace: ./ws
client_profile: gantry-task-cli
model:
  name: gantry-demo
  max_tokens_per_turn: 64
  temperature: 0
tools: [read_file, list_dir, exec]
permissions:
  fs:
    read: ["**"]
    write: []
  process:
    exec:
      # no rule_set: the sandbox applies the harness principal
      executables:
        - executable: /usr/bin/git
          subcommands: [status, log]
          forbidden_flags: [--output]
          operands: {globs: ["/workspace", "/workspace/**"]}
  network: deny
budget:
  max_model_tokens: 400
  max_tool_calls: 5
  max_turns: 6
  max_wall_seconds: 60
acceptance:
  - answer_contains: "Summary"
  - exactly_n_bullets: 3
  - cited_files_were_read: true
)";

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

std::string ErrorOf(const std::string& text) {
  auto m = ParseManifest(text, "task.yaml");
  EXPECT_FALSE(m.ok()) << text;
  return m.ok() ? "" : std::string(m.status().message());
}

TEST(Manifest, ParsesEveryKey) {
  auto m = ParseManifest(kGood, "task.yaml");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->name, "repo-summary");
  EXPECT_EQ(m->model.name, "gantry-demo");
  EXPECT_EQ(m->model.max_tokens_per_turn, 64);
  EXPECT_TRUE(m->model.has_temperature);
  EXPECT_EQ(m->tools, (std::vector<std::string>{"read_file", "list_dir", "exec"}));
  EXPECT_EQ(m->permissions.fs_read, std::vector<std::string>{"**"});
  ASSERT_TRUE(m->permissions.has_exec);
  ASSERT_EQ(m->permissions.exec.rules.size(), 1u);
  EXPECT_EQ(m->permissions.exec.rules[0].subcommands, (std::vector<std::string>{"status", "log"}));
  ASSERT_NE(m->permissions.exec.policy, nullptr);
  EXPECT_EQ(m->permissions.exec.policy->principals[0].commands.count("/usr/bin/git"), 1u);
  EXPECT_EQ(m->budget.max_model_tokens, 400);
  EXPECT_EQ(m->budget.max_tool_calls, 5);
  EXPECT_EQ(m->budget.max_consecutive_denials, 3);  // default
  ASSERT_EQ(m->acceptance.size(), 3u);
  EXPECT_EQ(m->acceptance[1].n, 3);
  EXPECT_EQ(m->acceptance[2].Name(), "cited_files_were_read");
}

TEST(Manifest, UnknownKeyHasLineColumnAndPath) {
  std::string e = ErrorOf(Replace(kGood, "  max_turns: 6\n", "  max_turns: 6\n  max_turnz: 7\n"));
  EXPECT_EQ(e.rfind("task.yaml:28:3: budget.max_turnz: unknown key", 0), 0u) << e;
}

TEST(Manifest, WrongTypesAreRefusedWithPosition) {
  EXPECT_EQ(ErrorOf(Replace(kGood, "max_tool_calls: 5", "max_tool_calls: five")),
            "task.yaml:26:19: budget.max_tool_calls: expected an integer in [0, 100000], got 'five'");
  EXPECT_NE(ErrorOf(Replace(kGood, "max_tool_calls: 5", "max_tool_calls: \"5\"")).find("(quoted)"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Replace(kGood, "max_tool_calls: 5", "max_tool_calls: -1")).find("got '-1'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Replace(kGood, "tools: [read_file, list_dir, exec]", "tools: read_file"))
                .find("tools: expected a sequence, got 'read_file'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Replace(kGood, "cited_files_were_read: true", "cited_files_were_read: yes"))
                .find("expected true or false"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Replace(kGood, "temperature: 0", "temperature: 9")).find("model.temperature"),
            std::string::npos);
}

TEST(Manifest, MissingRequiredKeys) {
  EXPECT_NE(ErrorOf(Replace(kGood, "  max_wall_seconds: 60\n", "")).find("missing required key 'max_wall_seconds'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Replace(kGood, "goal: Summarise the repository in three bullets.\n", ""))
                .find("missing required key 'goal'"),
            std::string::npos);
}

// Whose command grants the sandbox applies is not the manifest's to say: a rule_set is
// refused, naming its position, instead of being ignored.
TEST(Manifest, RefusesARuleSet) {
  const std::string error =
      ErrorOf(Replace(kGood, "      # no rule_set: the sandbox applies the harness principal\n",
                      "      rule_set: other-principal\n"));
  EXPECT_NE(error.find("task.yaml:17:17: permissions.process.exec.rule_set: no longer accepted"),
            std::string::npos)
      << error;
}

TEST(Manifest, RefusesWideningAndNonsense) {
  EXPECT_NE(ErrorOf(Replace(kGood, "network: deny", "network: allow")).find("only value is 'deny'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Replace(kGood, "read: [\"**\"]", "read: [\"/etc/**\"]")).find("relative to the workspace"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Replace(kGood, "read: [\"**\"]", "read: [\"src/../..\"]")).find("'..'"), std::string::npos);
  EXPECT_NE(ErrorOf(Replace(kGood, "tools: [read_file, list_dir, exec]", "tools: [read_file, shell]"))
                .find("task.yaml:10:20: tools[1]: unknown tool 'shell'"),
            std::string::npos);
  std::string no_exec = Replace(kGood, "  process:\n    exec:\n      # no rule_set: the sandbox applies the harness principal\n      executables:\n"
                                       "        - executable: /usr/bin/git\n"
                                       "          subcommands: [status, log]\n          forbidden_flags: [--output]\n"
                                       "          operands: {globs: [\"/workspace\", \"/workspace/**\"]}\n",
                                "");
  EXPECT_NE(ErrorOf(no_exec).find("'exec' is advertised but permissions.process.exec is missing"),
            std::string::npos);
  // The policy loader checks a task's executables as it checks a policy file's.
  EXPECT_NE(ErrorOf(Replace(kGood, "executable: /usr/bin/git", "executable: git"))
                .find("grants[0].commands[0].executable: expected the absolute, resolved path"),
            std::string::npos)
      << ErrorOf(Replace(kGood, "executable: /usr/bin/git", "executable: git"));
  EXPECT_NE(ErrorOf(Replace(kGood, "subcommands: [status, log]", "subcommands: []"))
                .find("executables[0].subcommands: expected at least one subcommand"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Replace(kGood, "executable: /usr/bin/git", "path: /usr/bin/git"))
                .find("permissions.process.exec.executables[0].path: no longer accepted"),
            std::string::npos)
      << ErrorOf(Replace(kGood, "executable: /usr/bin/git", "path: /usr/bin/git"));
  EXPECT_NE(ErrorOf(Replace(kGood, "  - exactly_n_bullets: 3\n", "  - {exactly_n_bullets: 3, answer_contains: x}\n"))
                .find("exactly one check"),
            std::string::npos);
}

TEST(Manifest, DuplicateKeysAliasesAndSyntax) {
  EXPECT_NE(ErrorOf(Replace(kGood, "name: repo-summary\n", "name: a\nname: b\n")).find("task.yaml:3:1: name: duplicate key"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Replace(kGood, "read: [\"**\"]\n    write: []", "read: &r [\"**\"]\n    write: *r"))
                .find("anchors and aliases are not allowed"),
            std::string::npos);
  EXPECT_NE(ErrorOf("goal: [unclosed\n").find("YAML syntax"), std::string::npos);
  EXPECT_NE(ErrorOf("").find("expected a mapping"), std::string::npos);
  EXPECT_NE(ErrorOf("- a\n- b\n").find("expected a mapping"), std::string::npos);
  EXPECT_NE(ErrorOf("version: 2\n").find("version: expected an integer in [1, 1]"), std::string::npos);
}

// yaml-cpp's parser reports empty documents without end for this text; reading one
// manifest must still end, with an error.
TEST(Manifest, TextThatNeverEndsAsDocumentsIsRefused) {
  for (const char* text : {",a", ",version: 1\ngoal: x\n"}) {
    EXPECT_NE(ErrorOf(text).find("expected one YAML document"), std::string::npos) << text;
  }
}

TEST(Manifest, RandomMutationsNeverCrash) {
  std::mt19937 rng(7);
  const std::string base = kGood;
  const char alphabet[] = "{}[]:,-&*!|>'\"#\n \t0aZ%@";
  for (int i = 0; i < 3000; ++i) {
    std::string s = base;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < edits; ++k) {
      size_t at = rng() % s.size();
      switch (rng() % 3) {
        case 0: s[at] = alphabet[rng() % (sizeof alphabet - 1)]; break;
        case 1: s.erase(at, 1 + rng() % 5); break;
        default: s.insert(at, 1, alphabet[rng() % (sizeof alphabet - 1)]);
      }
      if (s.empty()) s = "x";
    }
    auto m = ParseManifest(s, "fuzz.yaml");
    if (!m.ok()) EXPECT_EQ(std::string(m.status().message()).rfind("fuzz.yaml", 0), 0u);
  }
}

}  // namespace
}  // namespace gantry::harness
