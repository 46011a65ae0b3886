#include "policy/path_glob.h"

#include "gtest/gtest.h"

namespace gantry::policy {
namespace {

TEST(PathGlobTest, StarStaysInOneSegment) {
  EXPECT_TRUE(GlobMatch("/workspace/*.py", "/workspace/a.py"));
  EXPECT_FALSE(GlobMatch("/workspace/*.py", "/workspace/src/a.py"));
  EXPECT_TRUE(GlobMatch("/workspace/?.py", "/workspace/a.py"));
  EXPECT_FALSE(GlobMatch("/workspace/?.py", "/workspace/ab.py"));
  EXPECT_FALSE(GlobMatch("/a?b", "/a/b"));
}

TEST(PathGlobTest, DoubleStar) {
  EXPECT_TRUE(GlobMatch("/workspace/**", "/workspace/a"));
  EXPECT_TRUE(GlobMatch("/workspace/**", "/workspace/a/b/c"));
  EXPECT_FALSE(GlobMatch("/workspace/**", "/workspace"));
  EXPECT_FALSE(GlobMatch("/workspace/**", "/workspace2/a"));
  EXPECT_TRUE(GlobMatch("/workspace/**/*.py", "/workspace/a.py"));
  EXPECT_TRUE(GlobMatch("/workspace/**/*.py", "/workspace/x/y/a.py"));
  EXPECT_FALSE(GlobMatch("/workspace/**/*.py", "/workspace/x/y/a.pyc"));
  EXPECT_TRUE(GlobMatch("/**", "/etc/passwd"));
}

TEST(PathGlobTest, UncleanPathsNeverMatch) {
  EXPECT_FALSE(GlobMatch("/workspace/**", "/workspace/../etc/passwd"));
  EXPECT_FALSE(GlobMatch("/workspace/**", "/workspace/./a"));
  EXPECT_FALSE(GlobMatch("/workspace/**", "/workspace//a"));
  EXPECT_FALSE(GlobMatch("/workspace/**", "/workspace/a/"));
  EXPECT_FALSE(GlobMatch("/workspace/**", std::string("/workspace/a\0b", 14)));
  EXPECT_FALSE(GlobMatch("**", ""));
  EXPECT_FALSE(GlobMatch("/workspace/**", "/workspace/" + std::string(5000, 'a')));
  EXPECT_TRUE(IsCleanPath("/"));
  EXPECT_TRUE(IsCleanPath("a/b"));
  EXPECT_FALSE(IsCleanPath(".."));
}

TEST(PathGlobTest, AbsoluteCleanPathJoinsAndCleansLexically) {
  EXPECT_EQ(AbsoluteCleanPath("/workspace", "a.txt"), "/workspace/a.txt");
  EXPECT_EQ(AbsoluteCleanPath("/workspace/src", "./x/../y"), "/workspace/src/y");
  EXPECT_EQ(AbsoluteCleanPath("/workspace", "../etc/passwd"), "/etc/passwd");
  EXPECT_EQ(AbsoluteCleanPath("/workspace", "/../../etc//shadow"), "/etc/shadow");
  EXPECT_EQ(AbsoluteCleanPath("/workspace", "."), "/workspace");
  EXPECT_EQ(AbsoluteCleanPath("/", ".."), "/");
  EXPECT_EQ(AbsoluteCleanPath("relative", "a"), "");
  EXPECT_EQ(AbsoluteCleanPath("/workspace", ""), "");
  EXPECT_EQ(AbsoluteCleanPath("/workspace", std::string("a\0b", 3)), "");
}

TEST(PathGlobTest, ManyStarsStayFast) {
  std::string pattern = "/" + std::string(50, '*') + "b";
  EXPECT_FALSE(GlobMatch(pattern, "/" + std::string(3000, 'a')));
}

}  // namespace
}  // namespace gantry::policy
