#include "common/utf8.h"

#include <gtest/gtest.h>

namespace gantry {
namespace {

TEST(Utf8Test, SanitizeKeepsValidTextAndReplacesEachInvalidByte) {
  EXPECT_EQ(SanitizeUtf8("plain ascii"), "plain ascii");
  EXPECT_EQ(SanitizeUtf8("caf\xC3\xA9 \xF0\x9F\x99\x82"), "caf\xC3\xA9 \xF0\x9F\x99\x82");
  // A lone continuation byte, a truncated sequence, an overlong '/', a surrogate: each
  // byte that starts no valid sequence becomes one U+FFFD.
  EXPECT_EQ(SanitizeUtf8("a\x80z"), "a\xEF\xBF\xBDz");
  EXPECT_EQ(SanitizeUtf8("\xE4\xB8"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(SanitizeUtf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(SanitizeUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_TRUE(IsValidUtf8(SanitizeUtf8(std::string("\xFF\xFE\x00x", 4))));
}

}  // namespace
}  // namespace gantry
