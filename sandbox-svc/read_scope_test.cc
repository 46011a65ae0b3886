#include "sandbox-svc/read_scope.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "gtest/gtest.h"

namespace gantry::sandbox {
namespace {

ReadScope Scope(std::vector<std::vector<std::string>> all_of) { return ReadScope{std::move(all_of)}; }

TEST(ReadScopeTest, EveryListMustMatch) {
  ReadScope s = Scope({{"/w/src/**", "/w/a.txt"}, {"/w/**"}});
  EXPECT_TRUE(ScopeMatches(s, "/w/src/x.c"));
  EXPECT_TRUE(ScopeMatches(s, "/w/a.txt"));
  EXPECT_FALSE(ScopeMatches(s, "/w/b.txt"));
  EXPECT_FALSE(ScopeMatches(Scope({{"/w/**"}, {"/w/src/*.c"}}), "/w/src/x.h"));
  EXPECT_TRUE(ScopeMatches(Scope({}), "/anything"));
}

TEST(ReadScopeTest, TreesAndWhereMatchesMayLie) {
  ReadScope s = Scope({{"/w/src/**"}, {"/w/**", "/w/x"}});
  EXPECT_TRUE(ScopeCoversTree(s, "/w/src"));
  EXPECT_TRUE(ScopeCoversTree(s, "/w/src/deep"));
  EXPECT_FALSE(ScopeCoversTree(s, "/w/srcx"));
  EXPECT_FALSE(ScopeCoversTree(s, "/w"));
  EXPECT_FALSE(ScopeCoversTree(Scope({{"/w/*/**"}}), "/w/a"));  // a wildcard in the prefix
  EXPECT_TRUE(ScopeCoversTree(Scope({{"/**"}}), "/w"));
  EXPECT_TRUE(ScopeMayMatchBeneath(s, "/w"));
  EXPECT_TRUE(ScopeMayMatchBeneath(s, "/w/src"));
  EXPECT_FALSE(ScopeMayMatchBeneath(s, "/w/docs"));
  EXPECT_TRUE(ScopeMayMatchBeneath(Scope({{"/w/*/x.c"}}), "/w/docs"));
  EXPECT_TRUE(ScopeMayMatchBeneath(Scope({{"/w/**/x.c"}}), "/w/a/b"));
  EXPECT_FALSE(ScopeMayMatchBeneath(Scope({{"/v/**"}}), "/w"));
}

TEST(ReadScopeTest, WithinIsConservative) {
  const ReadScope all = Scope({});
  const ReadScope src = Scope({{"/w/src/**"}});
  EXPECT_TRUE(ScopeWithin(src, all));
  EXPECT_FALSE(ScopeWithin(all, src));
  EXPECT_TRUE(ScopeWithin(src, src));
  EXPECT_TRUE(ScopeWithin(Scope({{"/w/src/*.c"}}), src));
  EXPECT_TRUE(ScopeWithin(Scope({{"/w/src/a.c", "/w/src/deep/**"}}), src));
  EXPECT_FALSE(ScopeWithin(Scope({{"/w/src*"}}), src));   // /w/srcx is not beneath
  EXPECT_FALSE(ScopeWithin(Scope({{"/w/*/x.c"}}), src));
  EXPECT_TRUE(ScopeWithin(Scope({{"/w/a.txt"}}), Scope({{"/w/*.txt"}})));
  // Every list of the outer scope must hold one of the inner's.
  EXPECT_TRUE(ScopeWithin(Scope({{"/w/src/**"}, {"/w/**/*.c"}}), Scope({{"/w/**/*.c"}})));
  EXPECT_FALSE(ScopeWithin(Scope({{"/w/src/**"}}), Scope({{"/w/src/**"}, {"/w/**/*.c"}})));
  EXPECT_TRUE(ScopeWithin(Scope({{"/w/x"}}), Scope({{"/**"}})));
}

class PlanReadsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    root_ = std::string(tmp ? tmp : "/tmp") + "/plan_reads";
    ASSERT_EQ(std::system(("rm -rf '" + root_ + "' && mkdir -p '" + root_ + "/src/sub' '" +
                           root_ + "/docs' && touch '" + root_ + "/src/a.c' '" + root_ +
                           "/src/sub/b.c' '" + root_ + "/src/a.h' '" + root_ +
                           "/docs/r.md' '" + root_ + "/top.c' && ln -s docs '" + root_ +
                           "/src/docs-link' && ln -s ../docs/r.md '" + root_ + "/src/r.c'")
                              .c_str()),
              0);
  }
  std::vector<std::pair<std::string, ReadGrant::Kind>> Plan(std::vector<std::vector<std::string>> s,
                                                             ReadPlanLimits limits = {}) {
    for (auto& list : s) {
      for (auto& g : list) g = root_ + g;
    }
    ReadPlan p = PlanReads(root_, Scope(std::move(s)), limits);
    error_ = p.error;
    std::vector<std::pair<std::string, ReadGrant::Kind>> out;
    for (const auto& g : p.grants) out.emplace_back(g.path, g.kind);
    std::sort(out.begin(), out.end());
    return out;
  }
  std::string root_, error_;
};

TEST_F(PlanReadsTest, ATreeGlobIsOneRuleAndNothingElse) {
  using K = ReadGrant;
  EXPECT_EQ(Plan({{"/src/**"}}), (std::vector<std::pair<std::string, ReadGrant::Kind>>{{"src", K::kTree}}));
  EXPECT_EQ(Plan({}), (std::vector<std::pair<std::string, ReadGrant::Kind>>{{"", K::kTree}}));
  EXPECT_EQ(Plan({{"/**"}}), (std::vector<std::pair<std::string, ReadGrant::Kind>>{{"", K::kTree}}));
}

TEST_F(PlanReadsTest, FileGlobsGrantTheMatchingFilesOnlyAndNoLinks) {
  using K = ReadGrant;
  // src/r.c is a link (to docs/r.md): no rule; the kernel checks what it leads to.
  EXPECT_EQ(Plan({{"/src/*.c", "/top.c"}}),
            (std::vector<std::pair<std::string, ReadGrant::Kind>>{{"src/a.c", K::kFile},
                                                                  {"top.c", K::kFile}}));
  // The intersection of two grants' globs.
  EXPECT_EQ(Plan({{"/**/*.c"}, {"/src/**"}}),
            (std::vector<std::pair<std::string, ReadGrant::Kind>>{{"src/a.c", K::kFile},
                                                                  {"src/sub/b.c", K::kFile}}));
  EXPECT_EQ(Plan({{"/src/**"}, {"/**/b.c"}}),
            (std::vector<std::pair<std::string, ReadGrant::Kind>>{{"src/sub/b.c", K::kFile}}));
  // A matched directory may be listed.
  EXPECT_EQ(Plan({{"/*"}}),
            (std::vector<std::pair<std::string, ReadGrant::Kind>>{
                {"docs", K::kList}, {"src", K::kList}, {"top.c", K::kFile}}));
  EXPECT_EQ(error_, "");
}

TEST_F(PlanReadsTest, PastTheLimitsThereIsNoPlan) {
  ReadPlanLimits few;
  few.max_grants = 1;
  EXPECT_TRUE(Plan({{"/**/*.c"}}, few).empty());
  EXPECT_NE(error_.find("more than 1 workspace entries"), std::string::npos) << error_;
  ReadPlanLimits small;
  small.max_entries = 3;
  EXPECT_TRUE(Plan({{"/**/*.c"}}, small).empty());
  EXPECT_NE(error_.find("more than 3 entries"), std::string::npos) << error_;
}

}  // namespace
}  // namespace gantry::sandbox
