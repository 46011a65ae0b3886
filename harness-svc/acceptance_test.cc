#include "harness-svc/acceptance.h"

#include "gtest/gtest.h"

namespace gantry::harness {
namespace {

TEST(Acceptance, Citations) {
  EXPECT_EQ(CitedFiles("See `src/main.c:12` and README.md, also ./docs/a.md (e.g. i.e. v1.2)."),
            (std::vector<std::string>{"src/main.c", "README.md", "docs/a.md"}));
  EXPECT_EQ(CitedFiles("https://example.com/x.html and 3.14"), std::vector<std::string>{});
  EXPECT_EQ(CitedFiles("README.md README.md"), std::vector<std::string>{"README.md"});
}

TEST(Acceptance, Bullets) {
  EXPECT_EQ(CountBullets("Summary:\n- a\n- b\n  * c\n1. d\n2) e\nnot -a bullet\n-nope"), 5);
  EXPECT_EQ(CountBullets(""), 0);
}

TEST(Acceptance, Evaluate) {
  std::vector<AcceptanceCheck> checks(3);
  checks[0].kind = AcceptanceCheck::Kind::kAnswerContains;
  checks[0].text = "Summary";
  checks[1].kind = AcceptanceCheck::Kind::kExactlyNBullets;
  checks[1].n = 2;
  checks[2].kind = AcceptanceCheck::Kind::kCitedFilesWereRead;
  auto r = EvaluateAcceptance(checks, "Summary\n- README.md intro\n- src/main.c prints", {"README.md", "src/main.c"});
  ASSERT_EQ(r.size(), 3u);
  EXPECT_TRUE(r[0].passed && r[1].passed && r[2].passed) << r[2].detail;
  r = EvaluateAcceptance(checks, "summary\n- README.md\n- src/util.c\n- x", {"README.md"});
  EXPECT_FALSE(r[0].passed);
  EXPECT_FALSE(r[1].passed);
  EXPECT_EQ(r[1].detail, "3 bullets, expected 2");
  EXPECT_FALSE(r[2].passed);
  EXPECT_EQ(r[2].detail, "cited but not read: src/util.c");
}

}  // namespace
}  // namespace gantry::harness
