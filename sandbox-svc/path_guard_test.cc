#include "sandbox-svc/path_guard.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "gtest/gtest.h"
#include "sandbox-svc/sandbox.h"

namespace gantry::sandbox {
namespace {

TEST(PathGuardTest, SplitsAndRejectsEscapes) {
  EXPECT_EQ(*SplitToolPath("a/./b//c/"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(*SplitToolPath("/a/../b"), (std::vector<std::string>{"b"}));
  EXPECT_EQ(SplitToolPath("../x").status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(SplitToolPath("a/../../x").status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(SplitToolPath(std::string("a\0b", 3)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(SplitToolPath(std::string(5000, 'a')).ok());
}

TEST(PathGuardTest, ResolvesSymlinksInsideTheWorkspaceOnly) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string ws = std::string(tmp ? tmp : "/tmp") + "/pg_ws";
  ASSERT_EQ(std::system(("rm -rf '" + ws + "'; mkdir -p '" + ws + "/src/sub'").c_str()), 0);
  std::ofstream(ws + "/src/f.txt") << "x";
  ASSERT_EQ(symlink("src/f.txt", (ws + "/rel").c_str()), 0);
  ASSERT_EQ(symlink("/workspace/src", (ws + "/abs_in").c_str()), 0);
  ASSERT_EQ(symlink("/etc/passwd", (ws + "/abs_out").c_str()), 0);
  ASSERT_EQ(symlink("../../..", (ws + "/src/sub/up").c_str()), 0);
  ASSERT_EQ(symlink("loop2", (ws + "/loop1").c_str()), 0);
  ASSERT_EQ(symlink("loop1", (ws + "/loop2").c_str()), 0);
  EXPECT_EQ(*ResolveInWorkspace(ws, "rel"), "src/f.txt");
  EXPECT_EQ(*ResolveInWorkspace(ws, "abs_in/f.txt"), "src/f.txt");
  EXPECT_EQ(*ResolveInWorkspace(ws, "src/new/deeper.txt"), "src/new/deeper.txt");
  EXPECT_EQ(*ResolveInWorkspace(ws, ""), "");
  EXPECT_EQ(ResolveInWorkspace(ws, "abs_out").status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ResolveInWorkspace(ws, "src/sub/up/x").status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_FALSE(ResolveInWorkspace(ws, "loop1").ok());
  EXPECT_EQ(ResolveInWorkspace(ws, "missing/../../x").status().code(),
            absl::StatusCode::kPermissionDenied);
}

TEST(PathGuardTest, GlobMatch) {
  EXPECT_TRUE(GlobMatch("src/**", "src"));
  EXPECT_TRUE(GlobMatch("src/**", "src/a/b.c"));
  EXPECT_FALSE(GlobMatch("src/**", "srcx/a"));
  EXPECT_TRUE(GlobMatch("**/*.c", "a/b/c.c"));
  EXPECT_TRUE(GlobMatch("**/*.c", "c.c"));
  EXPECT_FALSE(GlobMatch("*.c", "a/c.c"));
  EXPECT_FALSE(GlobMatch("*", ".hidden"));
  EXPECT_TRUE(GlobMatch("**", "anything/at/all"));
  EXPECT_TRUE(MatchesAny({"a", "b/**"}, "b/x"));
  // Pathological patterns end (bounded work), they do not hang.
  std::string p;
  for (int i = 0; i < 30; ++i) p += "**/";
  EXPECT_FALSE(GlobMatch(p + "z", std::string(200, 'a') + "/b/c/d/e/f/g/h"));
}

TEST(SandboxLimitsTest, ClampsToCeilingAndFillsDefaults) {
  SandboxOptions o;
  v1::ToolLimits q;
  q.set_wall_ms(999999999);
  q.set_max_processes(2);
  IsolationLimits l = EffectiveLimits(q, o);
  EXPECT_EQ(l.wall_ms, o.ceiling.wall_ms);
  EXPECT_EQ(l.max_processes, 4u);  // floor
  EXPECT_EQ(l.cpu_seconds, o.defaults.cpu_seconds);
}

}  // namespace
}  // namespace gantry::sandbox
