#include "worker/constrain/json_grammar.h"

#include <algorithm>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "common/json_schema.h"
#include "gtest/gtest.h"

namespace gantry::constrain {
namespace {

std::shared_ptr<const JsonGrammar> G(const std::string& schema, Fidelity fidelity = Fidelity::kExact) {
  auto compiled = json_schema::Schema::CompileText(schema);
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  auto grammar = JsonGrammar::Compile(*compiled, fidelity);
  EXPECT_TRUE(grammar.ok()) << schema << ": " << grammar.status();
  return grammar.ok() ? *grammar : JsonGrammar::AnyObject();
}

// The matcher takes every byte of `text`.
bool Prefix(const std::shared_ptr<const JsonGrammar>& g, const std::string& text) {
  JsonMatcher m(g);
  return m.Feed(text);
}
// ... and `text` is a whole value.
bool Whole(const std::shared_ptr<const JsonGrammar>& g, const std::string& text) {
  JsonMatcher m(g);
  return m.Feed(text) && m.Complete();
}

TEST(JsonGrammarTest, ObjectsHaveTheirRequiredKeysOnceAndNoOthersWhenClosed) {
  auto g = G(R"({"type":"object","properties":{"path":{"type":"string"},"n":{"type":"integer"}},
                 "required":["path"],"additionalProperties":false})");
  EXPECT_TRUE(Whole(g, R"({"path":"a"})"));
  EXPECT_TRUE(Whole(g, R"({ "n": 3, "path" : "a" })"));
  EXPECT_TRUE(Whole(g, "{\n  \"path\": \"x\",\n  \"n\": -12\n}"));
  EXPECT_FALSE(Prefix(g, R"({})"));                    // path is required
  EXPECT_FALSE(Prefix(g, R"({"n":1})"));               // still open: no '}' yet
  EXPECT_TRUE(Prefix(g, R"({"n":1)"));
  EXPECT_FALSE(Prefix(g, R"({"x)"));                    // no declared key starts so
  EXPECT_FALSE(Prefix(g, R"({"pat":)"));                // a prefix of a key is no key
  EXPECT_FALSE(Prefix(g, R"({"path":"a","path")"));    // once
  EXPECT_FALSE(Prefix(g, R"({"path":1)"));              // a string
  EXPECT_FALSE(Prefix(g, R"({"path":"a"} )"));          // nothing after the root value
  EXPECT_FALSE(Prefix(g, R"({"n":1.5)"));               // an integer has no fraction
  // Open objects take other keys, each once.
  auto open = G(R"({"type":"object","properties":{"a":{"type":"boolean"}}})");
  EXPECT_TRUE(Whole(open, R"({"zz":[1,{"q":null}],"a":true})"));
  EXPECT_FALSE(Prefix(open, R"({"zz":1,"zz")"));
  EXPECT_FALSE(Prefix(open, R"({"a":1)"));
}

TEST(JsonGrammarTest, NumbersStayWithinTheirBoundsOnEveryPrefix) {
  auto g = G(R"({"type":"integer","minimum":1,"maximum":20})");
  EXPECT_FALSE(Prefix(g, "0"));  // only 0 and 0.x start so
  EXPECT_FALSE(Prefix(g, "-"));
  EXPECT_TRUE(Whole(g, "1"));
  EXPECT_TRUE(Whole(g, "20"));
  EXPECT_FALSE(Prefix(g, "21"));
  EXPECT_FALSE(Prefix(g, "30"));
  EXPECT_TRUE(Prefix(g, "3"));
  auto positive = G(R"({"type":"number","exclusiveMinimum":0})");
  EXPECT_TRUE(Prefix(positive, "0.0"));
  EXPECT_FALSE(Whole(positive, "0.0"));
  EXPECT_TRUE(Whole(positive, "0.001"));
  EXPECT_FALSE(Prefix(positive, "-"));
  EXPECT_FALSE(Prefix(positive, "1e5"));  // no exponent
  auto negative = G(R"({"type":"number","maximum":-2.5,"minimum":-3})");
  EXPECT_TRUE(Whole(negative, "-2.5"));
  EXPECT_TRUE(Whole(negative, "-3"));
  EXPECT_FALSE(Prefix(negative, "-3.1"));
  EXPECT_FALSE(Prefix(negative, "-2.4"));
  EXPECT_FALSE(Whole(negative, "-2"));
  EXPECT_TRUE(Prefix(negative, "-2"));  // -2.5 and more digits
  // Bounds past what the syntax writes are no bounds; an opencode tool's timeout.
  auto timeout = G(R"({"type":"number","exclusiveMinimum":0,"minimum":-9007199254740991,
                       "maximum":9007199254740991})");
  EXPECT_TRUE(Whole(timeout, "9007199254740991"));
  EXPECT_FALSE(Prefix(timeout, "9007199254740992"));
  EXPECT_FALSE(Whole(timeout, "0"));
  // An integer at most 18 digits long, a fraction at most 20.
  auto any = G(R"({"type":"number"})");
  EXPECT_TRUE(Whole(any, "123456789012345678"));
  EXPECT_FALSE(Prefix(any, "1234567890123456789"));
  EXPECT_FALSE(Prefix(any, "01"));
}

TEST(JsonGrammarTest, StringsAreValidUtf8WithLengthsInCodePoints) {
  auto g = G(R"({"type":"string","minLength":2,"maxLength":3})");
  EXPECT_FALSE(Whole(g, R"("a")"));
  EXPECT_TRUE(Whole(g, R"("ab")"));
  EXPECT_TRUE(Whole(g, "\"\xc3\xa9\xe2\x82\xac\\n\""));  // é € \n: three code points
  EXPECT_FALSE(Prefix(g, R"("abcd)"));
  EXPECT_FALSE(Prefix(g, "\"\xc3\x28"));   // a bad continuation byte
  EXPECT_FALSE(Prefix(g, "\"\xed\xa0\x80"));  // an encoded surrogate
  EXPECT_FALSE(Prefix(g, "\"\xc0\xaf"));   // overlong
  EXPECT_FALSE(Prefix(g, "\"a\x01"));      // a control byte
  EXPECT_FALSE(Prefix(g, R"("\ud83d)"));   // no surrogate escapes
  EXPECT_TRUE(Whole(g, R"("\u00e9\t")"));
  EXPECT_FALSE(Prefix(g, R"("\x)"));
}

TEST(JsonGrammarTest, EnumsAndConstsAreTheirValuesTextsThatValidate) {
  auto g = G(R"({"type":"string","enum":["text","markdown","html",7]})");
  EXPECT_TRUE(Whole(g, R"("markdown")"));
  EXPECT_FALSE(Prefix(g, R"("mark")") );
  EXPECT_FALSE(Prefix(g, "7"));  // not a string: refused by its own type
  auto numbers = G(R"({"enum":[1,12,"x",null]})");
  EXPECT_TRUE(Whole(numbers, "1"));
  EXPECT_TRUE(Whole(numbers, "12"));
  EXPECT_TRUE(Whole(numbers, "null"));
  EXPECT_FALSE(Prefix(numbers, "13"));
  auto in_object = G(R"({"type":"object","properties":{"k":{"enum":[1,12]}},"additionalProperties":false})");
  EXPECT_TRUE(Whole(in_object, R"({"k":1})"));
  EXPECT_TRUE(Whole(in_object, R"({"k":12 })"));
  EXPECT_FALSE(Prefix(in_object, R"({"k":2)"));
  auto constant = G(R"({"const":{"a":[true]}})");
  EXPECT_TRUE(Whole(constant, R"({"a":[true]})"));
  EXPECT_FALSE(Prefix(constant, R"({ "a")"));  // exactly the compact text
}

TEST(JsonGrammarTest, AlternativesAreFollowedUntilTheBytesDecide) {
  auto g = G(R"({"anyOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],
                           "additionalProperties":false},
                          {"type":"object","properties":{"b":{"type":"string"}},"required":["b"],
                           "additionalProperties":false},
                          {"type":"null"}]})");
  EXPECT_TRUE(Whole(g, R"({"a":1})"));
  EXPECT_TRUE(Whole(g, R"({"b":"x"})"));
  EXPECT_TRUE(Whole(g, "null"));
  EXPECT_FALSE(Prefix(g, R"({"a":"x")"));
  EXPECT_FALSE(Prefix(g, R"({"c")"));
  auto refs = G(R"({"$defs":{"node":{"type":"object","properties":{"next":{"$ref":"#/$defs/node"}},
                                     "additionalProperties":false}},
                    "$ref":"#/$defs/node"})");
  EXPECT_TRUE(Whole(refs, R"({"next":{"next":{}}})"));
  EXPECT_FALSE(Prefix(refs, R"({"next":{"other")"));
  auto arrays = G(R"({"type":"array","prefixItems":[{"type":"string"}],"items":{"type":"integer"},
                      "minItems":2,"maxItems":3})");
  EXPECT_TRUE(Whole(arrays, R"(["a",1])"));
  EXPECT_TRUE(Whole(arrays, R"(["a", 1, 2])"));
  EXPECT_FALSE(Prefix(arrays, R"(["a"])"));
  EXPECT_FALSE(Prefix(arrays, R"(["a",1,2,)"));
  EXPECT_FALSE(Prefix(arrays, R"([1)"));
}

TEST(JsonGrammarTest, WhatTheGrammarCannotEnforceIsRefusedOrLeftToTheValidator) {
  for (const char* schema : {
           R"({"type":"string","pattern":"^a"})",
           R"({"type":"array","uniqueItems":true})",
           R"({"type":"number","multipleOf":3})",
           R"({"not":{"type":"null"}})",
           R"({"oneOf":[{"type":"string"},{"type":"string","minLength":2}]})",
           R"({"type":"object","patternProperties":{"^x":{}}})",
           R"({"allOf":[{"type":"string"},{"minLength":1}]})",
           R"({"type":"string","anyOf":[{"minLength":1}]})",
           R"({"type":"number","minimum":0.000000000000000000001})",
       }) {
    auto compiled = json_schema::Schema::CompileText(schema);
    ASSERT_TRUE(compiled.ok()) << schema;
    auto exact = JsonGrammar::Compile(*compiled, Fidelity::kExact);
    EXPECT_FALSE(exact.ok()) << schema;
    EXPECT_NE(exact.status().message().find("does not enforce"), absl::string_view::npos) << exact.status();
    // Relaxed: a superset, so a value valid under the schema is still accepted.
    EXPECT_TRUE(JsonGrammar::Compile(*compiled, Fidelity::kRelaxed).ok()) << schema;
  }
  auto relaxed = G(R"({"type":"string","pattern":"^[1-9][0-9]*$"})", Fidelity::kRelaxed);
  EXPECT_TRUE(Whole(relaxed, R"("12")"));
  EXPECT_TRUE(Whole(relaxed, R"("x")"));  // the validator decides
  // Disjoint oneOf branches are exact.
  EXPECT_TRUE(JsonGrammar::Compile(*json_schema::Schema::CompileText(
                                       R"({"oneOf":[{"type":"string"},{"type":"integer"}]})"),
                                   Fidelity::kExact)
                  .ok());
}

TEST(JsonGrammarTest, JsonModeIsAnyObject) {
  auto g = JsonGrammar::AnyObject();
  EXPECT_TRUE(Whole(g, R"({"a":[1,2.5,{"b":null}],"c":"\u00e9"})"));
  EXPECT_TRUE(Whole(g, "{}"));
  EXPECT_FALSE(Prefix(g, "[]"));
  EXPECT_FALSE(Prefix(g, "\"x\""));
}

// A hermes call: one of the advertised names, that tool's arguments, then the envelope's
// end.
TEST(JsonGrammarTest, ToolCallsNameAnAdvertisedToolWithItsArgumentsThenTheEnvelopesEnd) {
  auto g = *JsonGrammar::ForToolCall(
      {{"bash", R"({"type":"object","properties":{"command":{"type":"string"}},"required":["command"]})"},
       {"todo", R"({"$defs":{"item":{"type":"object","properties":{"done":{"type":"boolean"}},
                    "required":["done"],"additionalProperties":false}},
                    "type":"object","properties":{"items":{"type":"array","items":{"$ref":"#/$defs/item"}}},
                    "required":["items"]})"},
       {"get_goal", ""}},
      Fidelity::kRelaxed);
  auto whole = [&](const std::string& text) {
    JsonMatcher m(g, "</tool_call>");
    return m.Feed(text) && m.Complete();
  };
  auto prefix = [&](const std::string& text) {
    JsonMatcher m(g, "</tool_call>");
    return m.Feed(text);
  };
  EXPECT_TRUE(whole("\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>"));
  EXPECT_TRUE(whole(R"({"arguments":{"items":[{"done":true}]},"name":"todo"}</tool_call>)"));
  EXPECT_TRUE(whole(R"({"name":"get_goal","arguments":{}} </tool_call>)"));
  EXPECT_FALSE(prefix(R"({"name":"rm")"));                             // not advertised
  EXPECT_FALSE(prefix(R"({"name":"bash","arguments":{"command":1)"));  // that tool's schema
  EXPECT_FALSE(prefix(R"({"name":"todo","arguments":{"items":[{"done":1)"));  // its $ref, rebased
  EXPECT_FALSE(prefix(R"({"name":"bash","arguments":{"command":"ls"},"id":)"));  // no other keys
  EXPECT_FALSE(whole(R"({"name":"bash","arguments":{"command":"ls"}})"));       // the end is due
  EXPECT_FALSE(prefix(R"({"name":"bash","arguments":{"command":"ls"}}</tool_call> )"));
}

// A random text the matcher accepts as whole: each byte drawn among those it allows,
// structural ones favoured so that values end. "" when it did not end in `max` bytes;
// "<dead end>" when the matcher allowed nothing before the value was whole.
std::string RandomValue(const std::shared_ptr<const JsonGrammar>& g, std::mt19937_64* rng, size_t max) {
  JsonMatcher m(g);
  std::string out;
  std::vector<uint8_t> order(256);
  for (int b = 0; b < 256; ++b) order[b] = static_cast<uint8_t>(b);
  while (out.size() < max) {
    if (m.Complete() && (*rng)() % 3 == 0) return out;
    // Structural bytes first half the time, then every byte in a random order: the
    // first one the matcher takes.
    std::shuffle(order.begin(), order.end(), *rng);
    if ((*rng)() % 2 == 0) {
      std::stable_partition(order.begin(), order.end(), [](uint8_t b) {
        return b == '"' || b == '}' || b == ']' || b == ',' || b == ':';
      });
    }
    bool fed = false;
    for (uint8_t b : order) {
      if (m.Feed(b)) {
        out.push_back(static_cast<char>(b));
        fed = true;
        break;
      }
    }
    if (!fed) return m.Complete() ? out : "<dead end>" + out;
  }
  return "";
}

json::Value ClientTools() {
  std::ifstream in("tests/data/clients/tool_schemas.json");
  std::stringstream text;
  text << in.rdbuf();
  auto parsed = json::Parse(text.str());
  EXPECT_TRUE(parsed.ok());
  return parsed.ok() ? *parsed : json::Value();
}

// OpenAI's strict form of a tool schema: every object with properties closed, so that
// a random walk writes declared keys (an open object's required keys are never found
// by random bytes).
void Close(json::Value* schema) {
  if (schema->is_array()) {
    for (json::Value& item : schema->items()) Close(&item);
    return;
  }
  if (!schema->is_object()) return;
  for (auto& [key, value] : schema->members()) Close(&value);
  if (schema->Find("properties") != nullptr && schema->Find("additionalProperties") == nullptr) {
    schema->Set("additionalProperties", json::Value::Bool(false));
  }
}

// What the matcher lets out parses and validates: walks through structured-output
// schemas and every real client tool schema the grammar enforces exactly.
TEST(JsonGrammarTest, EverythingItAcceptsAsWholeParsesAndValidates) {
  std::vector<std::pair<std::string, json_schema::Schema>> schemas;
  for (const char* text : {
           R"({"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":8},
               "age":{"type":"integer","minimum":0,"maximum":150},
               "tags":{"type":"array","items":{"enum":["a","b","c"]},"maxItems":3},
               "ratio":{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1}},
               "required":["name","age","ratio"],"additionalProperties":false})",
           R"({"anyOf":[{"type":"string"},{"type":"array","items":{"$ref":"#"},"maxItems":2}]})",
           R"({"type":["integer","null"],"minimum":-5,"maximum":5})",
           R"({"type":"object","minProperties":1,"maxProperties":2})",
       }) {
    schemas.emplace_back(text, *json_schema::Schema::CompileText(text));
  }
  json::Value tools = ClientTools();
  int exact_tools = 0, relaxed_tools = 0;
  for (const auto& [client, list] : tools.members()) {
    for (const json::Value& tool : list.items()) {
      const json::Value* params = tool.Find("parameters");
      if (params == nullptr || !params->is_object()) continue;  // a tool without parameters
      json::Value strict = *params;
      Close(&strict);
      auto schema = json_schema::Schema::Compile(strict);
      ASSERT_TRUE(schema.ok()) << schema.status();
      if (JsonGrammar::Compile(*schema, Fidelity::kExact).ok()) {
        schemas.emplace_back(absl::StrCat(client, " ", tool.Find("name")->as_string()), *schema);
        ++exact_tools;
      } else {
        // Relaxed: still JSON, never a dead end.
        auto g = *JsonGrammar::Compile(*schema, Fidelity::kRelaxed);
        std::mt19937_64 rng(7);
        for (int i = 0; i < 30; ++i) {
          const std::string text = RandomValue(g, &rng, 3000);
          ASSERT_NE(text.substr(0, 10), "<dead end>") << text;
          if (!text.empty()) EXPECT_TRUE(json::Parse(text).ok()) << text;
        }
        ++relaxed_tools;
      }
    }
  }
  EXPECT_GT(exact_tools, 20);
  EXPECT_GT(relaxed_tools, 0);  // qwen-code's oneOf with a pattern
  for (const auto& [name, schema] : schemas) {
    auto g = *JsonGrammar::Compile(schema, Fidelity::kExact);
    std::mt19937_64 rng(42);
    int ended = 0;
    const int walks = 60;
    for (int i = 0; i < walks; ++i) {
      const std::string text = RandomValue(g, &rng, 3000);
      ASSERT_NE(text.substr(0, 10), "<dead end>") << name << text;
      if (text.empty()) continue;
      ++ended;
      auto value = json::Parse(text);
      ASSERT_TRUE(value.ok()) << name << ": " << text;
      EXPECT_TRUE(schema.IsValid(*value)) << name << ": " << text << ": "
                                          << json_schema::JoinViolations(schema.Validate(*value));
    }
    EXPECT_GE(ended, walks * 8 / 10) << name;
  }
}

// The matcher's state keys: equal keys, equal futures (spot-checked on the bytes).
TEST(JsonGrammarTest, EqualKeysAcceptTheSameBytes) {
  auto g = G(R"({"type":"object","properties":{"s":{"type":"string","maxLength":5}},"additionalProperties":false})");
  JsonMatcher a(g), b(g);
  ASSERT_TRUE(a.Feed(R"({"s":"ab)"));
  ASSERT_TRUE(b.Feed(R"({"s":"xy)"));
  EXPECT_EQ(a.Key(), b.Key());
  JsonMatcher c(g);
  ASSERT_TRUE(c.Feed(R"({"s":"abc)"));
  EXPECT_NE(a.Key(), c.Key());  // one code point less left
}

}  // namespace
}  // namespace gantry::constrain
