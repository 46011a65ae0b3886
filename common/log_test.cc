#include "common/log.h"

#include <gtest/gtest.h>

namespace gantry {
namespace {

TEST(LogTest, LineIsJsonWithFixedKeys) {
  std::string line = FormatLogLineForTest(LogLevel::kWarning, "worker.lost",
                                          {{"worker_id", "w1"}, {"missed", "3"}},
                                          1'796'037'644'123'456);
  EXPECT_EQ(line,
            "{\"ts\":\"2026-11-30T11:20:44.123456Z\",\"level\":\"warning\","
            "\"component\":\"test\",\"event\":\"worker.lost\",\"worker_id\":\"w1\","
            "\"missed\":\"3\"}");
}

TEST(LogTest, EscapesControlsQuotesAndBadUtf8) {
  std::string out;
  AppendJsonString("a\"b\\c\n\x01\xff\xc3\xa9", &out);
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\n\\u0001\xEF\xBF\xBD\xC3\xA9\"");
  out.clear();
  // Overlong encoding of '/', a lone surrogate, and a truncated sequence.
  AppendJsonString("\xc0\xaf|\xed\xa0\x80|\xe2\x82", &out);
  EXPECT_EQ(out,
            "\"\xEF\xBF\xBD\xEF\xBF\xBD|\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD|"
            "\xEF\xBF\xBD\xEF\xBF\xBD\"");
}

}  // namespace
}  // namespace gantry
