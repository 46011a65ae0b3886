// The scripted sampler's rules (a TEST DOUBLE's script): first match wins, and a rule
// may apply only to requests that offer tools, or only to those that offer none.
#include "worker/server/script.h"

#include "gtest/gtest.h"

namespace gantry::server {
namespace {

TEST(ScriptTest, FirstMatchAndTheToolsCondition) {
  auto script = Script::FromYaml(
      "- {match: read, tools: true, emit: call}\n"
      "- {match: read, tools: false, emit: title}\n"
      "- {match: '', emit: other}\n");
  ASSERT_TRUE(script.ok()) << script.status();
  EXPECT_EQ(script->TextFor("please read it", true), "call");
  EXPECT_EQ(script->TextFor("please read it", false), "title");
  EXPECT_EQ(script->TextFor("hello", true), "other");
  EXPECT_FALSE(Script::FromYaml("- {match: a, emit: b, tools: maybe}\n").ok());
  EXPECT_FALSE(Script::FromYaml("- {match: a, emit: b, extra: 1}\n").ok());
  auto empty = Script::FromYaml("[]");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->TextFor("x", false), kDefaultScriptText);
}

}  // namespace
}  // namespace gantry::server
