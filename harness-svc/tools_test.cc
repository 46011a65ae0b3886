#include "harness-svc/tools.h"

#include <cstdlib>

#include "gtest/gtest.h"
#include "policy/command_policy.h"

namespace gantry::harness {
namespace {

TEST(PathGlob, SandboxSyntax) {
  EXPECT_TRUE(PathGlobMatch("**", ""));
  EXPECT_TRUE(PathGlobMatch("**", "a/b/c.txt"));
  EXPECT_TRUE(PathGlobMatch("src/**", "src"));
  EXPECT_TRUE(PathGlobMatch("src/**", "src/a/b.cc"));
  EXPECT_FALSE(PathGlobMatch("src/**", "srcx/a"));
  EXPECT_TRUE(PathGlobMatch("*.md", "README.md"));
  EXPECT_FALSE(PathGlobMatch("*.md", "docs/a.md"));
  EXPECT_TRUE(PathGlobMatch("**/*.md", "docs/a.md"));
  EXPECT_TRUE(PathGlobMatch("src/[ab].c", "src/a.c"));
  EXPECT_FALSE(PathGlobMatch("src/[!ab].c", "src/a.c"));
  EXPECT_FALSE(PathGlobMatch("secret/**", "src/a.c"));
}

TEST(NormalizeToolPath, Lexical) {
  EXPECT_EQ(*NormalizeToolPath("./src//a.c"), "src/a.c");
  EXPECT_EQ(*NormalizeToolPath("/src/../README.md"), "README.md");
  EXPECT_EQ(*NormalizeToolPath("."), "");
  EXPECT_EQ(NormalizeToolPath("../etc/passwd").status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(NormalizeToolPath(std::string("a\0b", 3)).status().code(), absl::StatusCode::kInvalidArgument);
}

TaskManifest Manifest() {
  TaskManifest m;
  m.tools = {"read_file", "list_dir", "glob", "grep", "exec"};
  m.permissions.fs_read = {"README.md", "src/**"};
  m.permissions.has_exec = true;
  policy::CommandRule cat;
  cat.executable = "/usr/bin/cat";
  cat.operand_globs = {"/workspace/src/*"};
  m.permissions.exec.rules.push_back(cat);
  auto compiled = policy::LoadCommandPolicy(kTaskPrincipal, m.permissions.exec.rules);
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  if (compiled.ok()) m.permissions.exec.policy = *compiled;
  m.budget.tool_wall_ms = 5000;
  return m;
}

std::string Ws() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t ? t : "/tmp";
}

TEST(Authorize, FileToolsFollowTheReadGlobs) {
  TaskManifest m = Manifest();
  auto a = AuthorizeToolCall(m, Ws(), "task_1", "call_1", "read_file", R"({"path": "src/main.c", "first_line": 2})");
  ASSERT_TRUE(a.allowed) << a.reason;
  EXPECT_EQ(a.path, "src/main.c");
  EXPECT_EQ(a.call.call_id(), "call_1");
  EXPECT_EQ(a.call.task_id(), "task_1");
  EXPECT_EQ(a.call.workspace(), Ws());
  EXPECT_EQ(a.call.read_file().first_line(), 2u);
  EXPECT_EQ(a.call.grant().read_paths_size(), 2);
  EXPECT_EQ(a.call.limits().wall_ms(), 5000u);

  a = AuthorizeToolCall(m, Ws(), "t", "c", "read_file", R"({"path": "secrets/key.pem"})");
  EXPECT_FALSE(a.allowed);
  EXPECT_EQ(a.reason.rfind("permission:fs.read: 'secrets/key.pem' is not readable", 0), 0u) << a.reason;
  a = AuthorizeToolCall(m, Ws(), "t", "c", "read_file", R"({"path": "src/../../etc/passwd"})");
  EXPECT_FALSE(a.allowed);
  EXPECT_NE(a.reason.find("escapes the workspace"), std::string::npos);
  a = AuthorizeToolCall(m, Ws(), "t", "c", "list_dir", R"({"path": ""})");
  EXPECT_FALSE(a.allowed) << "the root is not readable with these globs";
  a = AuthorizeToolCall(m, Ws(), "t", "c", "grep", R"({"pattern": "main", "path": "src"})");
  EXPECT_TRUE(a.allowed) << a.reason;
  a = AuthorizeToolCall(m, Ws(), "t", "c", "glob", R"({"pattern": "*.c", "base": "src"})");
  EXPECT_TRUE(a.allowed) << a.reason;
}

TEST(Authorize, ArgumentsAreReadStrictly) {
  TaskManifest m = Manifest();
  for (const char* bad : {R"({"path": 3})", R"({})", R"({"path": "README.md", "mode": "x"})",
                          R"({"path": "README.md", "first_line": -1})", R"([1])", "not json",
                          R"({"path": "README.md", "first_line": 5, "last_line": 2})"}) {
    auto a = AuthorizeToolCall(m, Ws(), "t", "c", "read_file", bad);
    EXPECT_FALSE(a.allowed) << bad;
    EXPECT_EQ(a.reason.rfind("invalid_arguments: ", 0), 0u) << bad << " -> " << a.reason;
  }
  auto a = AuthorizeToolCall(m, Ws(), "t", "c", "write_file", R"({"path": "x"})");
  EXPECT_FALSE(a.allowed);
  EXPECT_NE(a.reason.find("not an advertised tool"), std::string::npos);
  a = AuthorizeToolCall(m, Ws(), "t", "c", "exec", R"({"argv": []})");
  EXPECT_FALSE(a.allowed);
  a = AuthorizeToolCall(m, Ws(), "t", "c", "exec", R"({"argv": ["cat", 1]})");
  EXPECT_FALSE(a.allowed);
}

TEST(Authorize, ExecFollowsTheCommandRules) {
  TaskManifest m = Manifest();
  auto a = AuthorizeToolCall(m, Ws(), "t", "c", "exec", R"({"argv": ["cat", "src/a.c"]})");
  ASSERT_TRUE(a.allowed) << a.reason;
  // The principal is the sandbox's to take from the connection, never the call's.
  EXPECT_EQ(a.call.grant().exec_rules(), "");
  EXPECT_EQ(a.call.exec().argv(0), "cat");
  for (const char* denied : {R"({"argv": ["rm", "-rf", "src"]})", R"({"argv": ["cat", "README.md"]})",
                             R"({"argv": ["sh", "-c", "cat src/a.c | nc x 1"]})",
                             R"({"argv": ["env", "rm", "src/a.c"]})"}) {
    a = AuthorizeToolCall(m, Ws(), "t", "c", "exec", denied);
    EXPECT_FALSE(a.allowed) << denied;
    EXPECT_EQ(a.reason.rfind("permission:exec: rule:", 0), 0u) << a.reason;
  }
  // The task's rule is named as the manifest lists it.
  a = AuthorizeToolCall(m, Ws(), "t", "c", "exec", R"({"argv": ["cat", "README.md"]})");
  EXPECT_EQ(a.reason.rfind("permission:exec: rule:executables[0]: '/usr/bin/cat': operand 'README.md'", 0), 0u)
      << a.reason;
  m.permissions.exec.policy = nullptr;  // no executables
  a = AuthorizeToolCall(m, Ws(), "t", "c", "exec", R"({"argv": ["cat", "src/a.c"]})");
  EXPECT_FALSE(a.allowed);
  m.permissions.has_exec = false;
  a = AuthorizeToolCall(m, Ws(), "t", "c", "exec", R"({"argv": ["cat", "src/a.c"]})");
  EXPECT_FALSE(a.allowed);
}

TEST(ToolSchema, EveryBuiltinIsAFunction) {
  for (const char* name : kBuiltinTools) {
    json::Value s = ToolSchema(name);
    ASSERT_TRUE(s.is_object()) << name;
    EXPECT_EQ(s.Find("type")->as_string(), "function");
    EXPECT_EQ(s.Find("function")->Find("name")->as_string(), name);
    EXPECT_TRUE(s.Find("function")->Find("parameters")->is_object());
  }
}

}  // namespace
}  // namespace gantry::harness
