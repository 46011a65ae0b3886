#include "common/ids.h"

#include <gtest/gtest.h>

#include <set>

namespace gantry {
namespace {

TEST(IdsTest, ShapeAndUniqueness) {
  std::set<std::string> seen;
  for (int i = 0; i < 10000; ++i) {
    std::string id = NewId("req");
    ASSERT_TRUE(IsValidId(id, "req")) << id;
    ASSERT_TRUE(seen.insert(id).second) << "collision " << id;
  }
  EXPECT_EQ(NewId("call").size(), 4 + 1 + 24u);
}

TEST(IdsTest, RejectsForeignShapes) {
  EXPECT_FALSE(IsValidId("", "req"));
  EXPECT_FALSE(IsValidId("req_", "req"));
  EXPECT_FALSE(IsValidId("call_0123456789abcdef01234567", "req"));
  EXPECT_FALSE(IsValidId("req_0123456789ABCDEF01234567", "req"));
  EXPECT_FALSE(IsValidId("req-0123456789abcdef01234567", "req"));
  EXPECT_FALSE(IsValidId("req_0123456789abcdef0123456", "req"));
  EXPECT_TRUE(IsValidId("req_0123456789abcdef01234567", "req"));
}

}  // namespace
}  // namespace gantry
