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

TEST(Utf8Test, PrefixNeverEndsInsideACharacter) {
  EXPECT_EQ(Utf8Prefix("short", 10), "short");
  EXPECT_EQ(Utf8Prefix("abcdef", 3), "abc");
  EXPECT_EQ(Utf8Prefix("ab\xC3\xA9z", 3), "ab");          // the cut fell inside the é
  EXPECT_EQ(Utf8Prefix("ab\xC3\xA9z", 4), "ab\xC3\xA9");
  EXPECT_EQ(Utf8Prefix("\xF0\x9F\x99\x82", 2), "");
  EXPECT_TRUE(IsValidUtf8(Utf8Prefix("a\xE4\xB8\xAD\xE6\x96\x87", 5)));
}

}  // namespace

}  // namespace gantry
