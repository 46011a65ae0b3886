#include "common/json.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>
#include <random>

#include "common/status.h"

namespace gantry::json {
namespace {

Value MustParse(absl::string_view text) {
  auto v = Parse(text);
  EXPECT_TRUE(v.ok()) << v.status() << " for " << text;
  return v.ok() ? *v : Value();
}

// Expected strings below are what CPython 3.11 prints for the same values.
TEST(JsonTest, PythonFloatReprMatchesCPython) {
  const std::pair<double, const char*> cases[] = {
      {1.0, "1.0"}, {1.5, "1.5"}, {0.1, "0.1"}, {100.0, "100.0"}, {1e16, "1e+16"},
      {1e-5, "1e-05"}, {0.0001, "0.0001"}, {1234567890123456.0, "1234567890123456.0"},
      {12345678901234567.0, "1.2345678901234568e+16"}, {1.5e-07, "1.5e-07"},
      {1e100, "1e+100"}, {-2.5, "-2.5"}, {3.141592653589793, "3.141592653589793"},
      {0.30000000000000004, "0.30000000000000004"}, {5e-324, "5e-324"},
      {1.7976931348623157e308, "1.7976931348623157e+308"}, {123.456, "123.456"},
      {1e22, "1e+22"}, {-0.0, "-0.0"}, {9007199254740992.0, "9007199254740992.0"},
      {0.5, "0.5"}};
  for (const auto& [value, text] : cases) EXPECT_EQ(PythonFloatRepr(value), text);
}

TEST(JsonTest, DumpEqualsPythonDumpsEnsureAsciiFalse) {
  Value v = MustParse(R"({"b": [1, 2.0, {"x": null}], "a": "\u00e9\u2028\n\""})");
  EXPECT_EQ(Dump(v), "{\"b\": [1, 2.0, {\"x\": null}], \"a\": \"\xC3\xA9\xE2\x80\xA8\\n\\\"\"}");
}

TEST(JsonTest, DumpWithIndentSortKeysEnsureAscii) {
  Value v = MustParse("{\"b\":[1,2.0,{\"x\":null}],\"a\":\"\xC3\xA9\xF0\x9F\x98\x80\"}");
  DumpOptions options;
  options.ensure_ascii = true;
  options.indent = 2;
  options.sort_keys = true;
  EXPECT_EQ(Dump(v, options),
            "{\n  \"a\": \"\\u00e9\\ud83d\\ude00\",\n  \"b\": [\n    1,\n    2.0,\n    {\n"
            "      \"x\": null\n    }\n  ]\n}");
}

TEST(JsonTest, NumbersKeepTheirKindAndText) {
  Value v = MustParse("[1.0, 1, 1e2, -0, 12345678901234567890123, 1.50, 1E-400]");
  EXPECT_EQ(DumpCompact(v), "[1.0,1,100.0,0,12345678901234567890123,1.5,0.0]");
  EXPECT_TRUE(v.items()[1].is_integer());
  EXPECT_FALSE(v.items()[0].is_integer());
  EXPECT_EQ(*v.items()[1].as_int64(), 1);
  EXPECT_FALSE(v.items()[4].as_int64().has_value());  // beyond int64: kept as text
  EXPECT_NE(v.items()[0], v.items()[1]);               // 1.0 != 1, as a round trip sees it
}

TEST(JsonTest, ObjectsKeepOrderAndDuplicatesKeepFirstPositionLastValue) {
  Value v = MustParse(R"({"z": 1, "a": 2, "z": 3})");
  ASSERT_EQ(v.members().size(), 2u);
  EXPECT_EQ(v.members()[0].first, "z");
  EXPECT_EQ(DumpCompact(*v.Find("z")), "3");
  EXPECT_EQ(v.Find("missing"), nullptr);
}

TEST(JsonTest, LargeObjectsKeepOrderAndDuplicateRule) {
  std::string text = "{";
  for (int i = 0; i < 200000; ++i) text += "\"k" + std::to_string(i) + "\": " + std::to_string(i) + ",";
  text += "\"k7\": -1, \"k199999\": -2}";
  Value v = MustParse(text);
  ASSERT_EQ(v.members().size(), 200000u);
  EXPECT_EQ(v.members()[7].first, "k7");
  EXPECT_EQ(DumpCompact(v.members()[7].second), "-1");
  EXPECT_EQ(DumpCompact(v.members().back().second), "-2");
  EXPECT_EQ(v.members()[8].first, "k8");
}

TEST(JsonTest, StringEscapesAndSurrogatePairs) {
  Value v = MustParse(R"(["\ud83d\ude00", "\/\b\f\t\r\n", "\u0000"])");
  EXPECT_EQ(v.items()[0].as_string(), "\xF0\x9F\x98\x80");
  EXPECT_EQ(v.items()[1].as_string(), "/\b\f\t\r\n");
  EXPECT_EQ(v.items()[2].as_string(), std::string(1, '\0'));
  EXPECT_EQ(Dump(v), "[\"\xF0\x9F\x98\x80\", \"/\\b\\f\\t\\r\\n\", \"\\u0000\"]");
}

TEST(JsonTest, RejectsWhatRfc8259Rejects) {
  const char* bad[] = {
      "", " ", "{", "[1,]", "{\"a\":1,}", "01", "1.", ".5", "+1", "1e", "NaN", "Infinity",
      "[1 2]", "{\"a\" 1}", "{a:1}", "'x'", "\"unterminated", "\"tab\there\"",
      "\"\\x\"", "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"", "\"\\u12\"",
      "\"\xff\"", "\"\xc0\xaf\"", "\"\xed\xa0\x80\"", "[1] x", "tru", "nul", "//c\n1",
      "[1]\n]", "1e400", "-1E309"};
  for (const char* text : bad) {
    auto v = Parse(text);
    ASSERT_FALSE(v.ok()) << "accepted: " << text;
    EXPECT_EQ(ReasonOf(v.status()), "invalid_json");
  }
}

TEST(JsonTest, ErrorsSayLineAndColumn) {
  auto v = Parse("{\n  \"a\": 1,\n  \"b\": tru\n}");
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("line 3, column 8"), absl::string_view::npos)
      << v.status().message();
}

TEST(JsonTest, DepthIsBounded) {
  std::string deep(100000, '[');
  auto v = Parse(deep);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("nesting"), absl::string_view::npos);
  std::string ok_depth = std::string(200, '[') + std::string(200, ']');
  EXPECT_TRUE(Parse(ok_depth).ok());
}

TEST(JsonTest, SetReplacesInPlace) {
  Value v = Value::EmptyObject();
  v.Set("a", Value::Int(1));
  v.Set("b", Value::String("x"));
  v.Set("a", Value::Double(2.0));
  EXPECT_EQ(DumpCompact(v), "{\"a\":2.0,\"b\":\"x\"}");
}

TEST(JsonTest, RandomDocumentsRoundTrip) {
  std::mt19937 rng(7);
  std::function<Value(int)> make = [&](int depth) -> Value {
    switch (depth > 3 ? rng() % 4 : rng() % 6) {
      case 0: return Value();
      case 1: return Value::Bool(rng() % 2);
      case 2: return rng() % 2 ? Value::Int(static_cast<int32_t>(rng()))
                               : Value::Double(static_cast<double>(rng()) / 977.0);
      case 3: {
        static const char* kPieces[] = {"a", "\"", "\\", "\n", "\x01", "\xC3\xA9",
                                        "\xF0\x9F\x98\x80", "\xE2\x80\xA8", "/"};
        std::string s;
        for (int i = rng() % 6; i > 0; --i) s += kPieces[rng() % 9];
        return Value::String(s);
      }
      case 4: {
        Value a = Value::EmptyArray();
        for (int i = rng() % 4; i > 0; --i) a.Append(make(depth + 1));
        return a;
      }
      default: {
        Value o = Value::EmptyObject();
        for (int i = rng() % 4; i > 0; --i) o.Set("k" + std::to_string(rng() % 5), make(depth + 1));
        return o;
      }
    }
  };
  for (int i = 0; i < 500; ++i) {
    Value v = make(0);
    for (bool ascii : {false, true}) {
      DumpOptions options;
      options.ensure_ascii = ascii;
      auto back = Parse(Dump(v, options));
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_EQ(*back, v) << Dump(v);
    }
  }
}


TEST(JsonTest, ScanContainerLengthMatchesBracketsOutsideStrings) {
  EXPECT_EQ(ScanContainerLength("[1, 2] tail"), 6u);
  EXPECT_EQ(ScanContainerLength(R"({"a": "]}\"]", "b": [{}]},)"), 25u);
  EXPECT_EQ(ScanContainerLength(R"(["\\", "\u005d"])"), 16u);
  EXPECT_EQ(ScanContainerLength("[[[]]]"), 6u);
  EXPECT_EQ(ScanContainerLength("[1, 2"), 0u);
  EXPECT_EQ(ScanContainerLength(R"(["open)"), 0u);
  EXPECT_EQ(ScanContainerLength("1"), 0u);
  EXPECT_EQ(ScanContainerLength(" []"), 0u);
  EXPECT_EQ(ScanContainerLength(""), 0u);
}

// A member value the caller holds is skipped (left null); only top-level members are
// offered; everything after it parses (and fails) as without the option.
TEST(JsonTest, KnownMemberValuesAreSkipped) {
  std::vector<std::string> keys;
  ParseOptions options;
  options.known_member_value = [&keys](absl::string_view key, absl::string_view rest) -> size_t {
    keys.emplace_back(key);
    return key == "known" ? ScanContainerLength(rest) : 0;
  };
  auto v = Parse(R"({"a": {"known": [1]}, "known": [1, {"x": "]"}], "b": 2})", options);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(keys, (std::vector<std::string>{"a", "known", "b"}));
  EXPECT_EQ(DumpCompact(*v), R"({"a":{"known":[1]},"known":null,"b":2})");
  // Errors after the skipped bytes are where they are without the option.
  const std::string bad = R"({"known": [1, 2], "b": tru})";
  auto with = Parse(bad, options);
  auto without = Parse(bad);
  ASSERT_FALSE(with.ok());
  EXPECT_EQ(with.status(), without.status());
  // A length beyond the input is ignored: the value is parsed.
  options.known_member_value = [](absl::string_view, absl::string_view rest) { return rest.size() + 1; };
  auto parsed = Parse(R"({"k": [1]})", options);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(DumpCompact(*parsed), R"({"k":[1]})");
  // Repeated keys keep their rule: first position, last value (here the skipped one).
  options.known_member_value = [](absl::string_view key, absl::string_view rest) -> size_t {
    return key == "k" && rest.substr(0, 3) == "[2]" ? 3 : 0;
  };
  parsed = Parse(R"({"k": [1], "j": 0, "k": [2]})", options);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(DumpCompact(*parsed), R"({"k":null,"j":0})");
}

}  // namespace
}  // namespace gantry::json
