#include "common/json_schema.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/status.h"
#include "gtest/gtest.h"

namespace gantry::json_schema {
namespace {

json::Value J(const std::string& text) {
  auto v = json::Parse(text);
  EXPECT_TRUE(v.ok()) << text << ": " << v.status();
  return v.ok() ? *v : json::Value();
}

Schema S(const std::string& text) {
  auto s = Schema::CompileText(text);
  EXPECT_TRUE(s.ok()) << text << ": " << s.status();
  return s.ok() ? *s : Schema();
}

// Violations as strings, "path: message".
std::vector<std::string> V(const Schema& schema, const std::string& value) {
  std::vector<std::string> out;
  for (const Violation& v : schema.Validate(J(value))) out.push_back(v.ToString());
  EXPECT_EQ(out.empty(), schema.IsValid(J(value))) << value;
  return out;
}

bool Valid(const Schema& schema, const std::string& value) { return V(schema, value).empty(); }

// ---------------------------------------------------------------------------------------
// The tools real clients advertise (tests/data/toolcall/tool_schemas.json).

json::Value ClientTools() {
  std::ifstream in("tests/data/toolcall/tool_schemas.json");
  std::stringstream text;
  text << in.rdbuf();
  return J(text.str());
}

Schema ClientTool(const std::string& client, const std::string& name) {
  json::Value all = ClientTools();
  const json::Value* tools = all.Find(client);
  if (tools == nullptr) {
    ADD_FAILURE() << client;
    return Schema();
  }
  for (const json::Value& tool : tools->items()) {
    if (tool.Find("name")->as_string() != name) continue;
    auto schema = Schema::Compile(*tool.Find("parameters"));
    EXPECT_TRUE(schema.ok()) << schema.status();
    return schema.ok() ? *schema : Schema();
  }
  ADD_FAILURE() << client << "/" << name;
  return Schema();
}

TEST(JsonSchemaClientsTest, EveryAdvertisedSchemaCompiles) {
  json::Value all = ClientTools();
  ASSERT_TRUE(all.is_object());
  int compiled = 0;
  for (const auto& [client, tools] : all.members()) {
    for (const json::Value& tool : tools.items()) {
      const json::Value* parameters = tool.Find("parameters");
      ASSERT_NE(parameters, nullptr);
      if (!parameters->is_object()) continue;  // "<absent>": the client sent none
      auto schema = Schema::Compile(*parameters);
      EXPECT_TRUE(schema.ok()) << client << "/" << tool.Find("name")->as_string() << ": "
                               << schema.status();
      ++compiled;
    }
  }
  EXPECT_EQ(compiled, 30);
}

TEST(JsonSchemaClientsTest, OpenCodeBash) {
  Schema bash = ClientTool("opencode/chat", "bash");
  EXPECT_TRUE(Valid(bash, R"({"command": "ls -la", "description": "List files"})"));
  EXPECT_TRUE(Valid(bash, R"({"command": "make", "timeout": 120000, "workdir": "/tmp"})"));
  EXPECT_TRUE(Valid(bash, R"({"command": "make", "timeout": 1.0})"));  // integer in 2020-12
  EXPECT_TRUE(Valid(bash, R"({"command": "make", "timeout": 9007199254740991})"));
  EXPECT_EQ(V(bash, R"({"timeout": 5})"),
            std::vector<std::string>{"(root): missing required property \"command\""});
  EXPECT_EQ(V(bash, R"({"command": null})"),
            std::vector<std::string>{"/command: expected string, got null"});
  EXPECT_EQ(V(bash, R"({"command": "x", "timeout": 0})"),
            std::vector<std::string>{"/timeout: must be > 0 (exclusiveMinimum), got 0"});
  EXPECT_EQ(V(bash, R"({"command": "x", "timeout": 2.5})"),
            std::vector<std::string>{"/timeout: expected integer, got number"});
  EXPECT_EQ(V(bash, R"({"command": "x", "timeout": 9007199254740992})"),
            std::vector<std::string>{
                "/timeout: must be <= 9007199254740991 (maximum), got 9007199254740992"});
  // Every violation, not only the first.
  EXPECT_EQ(V(bash, R"({"timeout": -3, "workdir": 7})").size(), 3u);
  EXPECT_EQ(V(bash, "[]"), std::vector<std::string>{"(root): expected object, got array"});
}

TEST(JsonSchemaClientsTest, OpenCodeTodowriteAndWebfetch) {
  Schema todo = ClientTool("opencode/chat", "todowrite");
  EXPECT_TRUE(Valid(todo, R"({"todos": [{"content": "a", "status": "pending",
                                          "priority": "high"}]})"));
  EXPECT_TRUE(Valid(todo, R"({"todos": []})"));
  EXPECT_EQ(V(todo, R"({"todos": [{"content": "a", "status": "x", "priority": "low"},
                                  {"content": null, "priority": "low"}]})"),
            (std::vector<std::string>{"/todos/1: missing required property \"status\"",
                                      "/todos/1/content: expected string, got null"}));
  Schema fetch = ClientTool("opencode/chat", "webfetch");
  EXPECT_TRUE(Valid(fetch, R"({"url": "https://example.com", "format": "html", "timeout": 2.5})"));
  EXPECT_EQ(V(fetch, R"({"url": "u", "format": "pdf"})"),
            std::vector<std::string>{
                "/format: must be one of [\"text\",\"markdown\",\"html\"], got \"pdf\""});
}

TEST(JsonSchemaClientsTest, QwenCodeTools) {
  Schema read = ClientTool("qwen-code/chat-default", "read_file");
  EXPECT_TRUE(Valid(read, R"({"file_path": "/a", "offset": null, "limit": 10, "pages": null})"));
  EXPECT_EQ(V(read, R"({"file_path": "/a", "offset": "10"})"),
            std::vector<std::string>{"/offset: expected integer or null, got string"});

  Schema agent = ClientTool("qwen-code/chat-default", "agent");
  const std::string base = R"("description": "d", "prompt": "p")";
  EXPECT_TRUE(Valid(agent, "{" + base + R"(, "fork_turns": "all"})"));
  EXPECT_TRUE(Valid(agent, "{" + base + R"(, "fork_turns": "12"})"));
  EXPECT_FALSE(Valid(agent, "{" + base + R"(, "fork_turns": "012"})"));
  EXPECT_FALSE(Valid(agent, "{" + base + R"(, "fork_turns": 3})"));
  EXPECT_TRUE(Valid(agent, "{" + base + R"(, "fork_profile": "ab"})"));
  EXPECT_FALSE(Valid(agent, "{" + base + R"(, "fork_profile": "a"})"));
  EXPECT_FALSE(Valid(agent, "{" + base + R"(, "fork_tools": ["read", ""]})"));
  EXPECT_FALSE(Valid(agent, "{" + base + R"(, "isolation": "none"})"));

  Schema call = ClientTool("qwen-code/chat-default", "tool_call");
  EXPECT_TRUE(Valid(call, R"({"name": "x", "arguments": {}})"));
  EXPECT_EQ(
      V(call, R"({"name": "x", "arguments": {}, "extra": 1})"),
      std::vector<std::string>{"/extra: unexpected property (additionalProperties is false)"});

  Schema search = ClientTool("qwen-code/chat-default", "tool_search");
  EXPECT_TRUE(Valid(search, R"({"query": "q", "max_results": 20})"));
  EXPECT_FALSE(Valid(search, R"({"query": "q", "max_results": 21})"));
  EXPECT_FALSE(Valid(search, R"({"query": "", "max_results": 1})"));

  Schema shell = ClientTool("qwen-code/chat-yolo", "run_shell_command");
  EXPECT_TRUE(Valid(shell, R"({"command": "ls", "timeout": 600000, "is_background": false})"));
  EXPECT_FALSE(Valid(shell, R"({"command": "ls", "timeout": 600001})"));
}

// ---------------------------------------------------------------------------------------
// Keywords and their edge cases.

TEST(JsonSchemaTest, IntegerAcceptsIntegralNumbers) {
  Schema s = S(R"({"type": "integer"})");
  for (const char* ok : {"1", "1.0", "-0", "1e2", "1.5e1", "100000000000000000000000"}) {
    EXPECT_TRUE(Valid(s, ok)) << ok;
  }
  for (const char* bad : {"1.5", "1e-1", "\"1\"", "true", "null"})
    EXPECT_FALSE(Valid(s, bad)) << bad;
  EXPECT_TRUE(Valid(S(R"({"type": "number"})"), "7"));
}

TEST(JsonSchemaTest, ExclusiveBounds) {
  Schema s = S(R"({"exclusiveMinimum": 0, "exclusiveMaximum": 10})");
  for (const char* ok : {"1e-300", "0.5", "9.999999999999999999"}) EXPECT_TRUE(Valid(s, ok)) << ok;
  for (const char* bad : {"0", "0.0", "-0", "-1e-300", "10", "10.0", "1e1"}) {
    EXPECT_FALSE(Valid(s, bad)) << bad;
  }
  EXPECT_TRUE(Valid(s, "\"not a number\""));  // bounds only constrain numbers
  // Draft 4's boolean form.
  Schema d4 = S(R"({"minimum": 0, "exclusiveMinimum": true})");
  EXPECT_FALSE(Valid(d4, "0"));
  EXPECT_TRUE(Valid(d4, "1"));
}

TEST(JsonSchemaTest, ExactBigNumbers) {
  Schema s = S(R"({"maximum": 9007199254740992})");
  EXPECT_TRUE(Valid(s, "9007199254740992"));
  EXPECT_FALSE(Valid(s, "9007199254740993"));  // the same double, a different number
  EXPECT_FALSE(Valid(s, "9007199254740992.5"));
  EXPECT_TRUE(Valid(S(R"({"minimum": -9007199254740991})"), "-9007199254740991"));
  EXPECT_FALSE(Valid(S(R"({"minimum": -9007199254740991})"), "-9007199254740992"));
}

TEST(JsonSchemaTest, MultipleOf) {
  Schema cents = S(R"({"multipleOf": 0.01})");
  EXPECT_TRUE(Valid(cents, "0.07"));
  EXPECT_TRUE(Valid(cents, "19.99"));
  EXPECT_FALSE(Valid(cents, "0.075"));
  Schema three = S(R"({"multipleOf": 3})");
  EXPECT_TRUE(Valid(three, "9"));
  EXPECT_TRUE(Valid(three, "3e40"));
  EXPECT_FALSE(Valid(three, "10"));
  EXPECT_FALSE(Schema::CompileText(R"({"multipleOf": 0})").ok());
}

TEST(JsonSchemaTest, TypeArraysWithNull) {
  Schema s = S(R"({"type": ["integer", "null"]})");
  EXPECT_TRUE(Valid(s, "null"));
  EXPECT_TRUE(Valid(s, "3"));
  EXPECT_EQ(V(s, "\"3\""),
            std::vector<std::string>{"(root): expected integer or null, got string"});
  EXPECT_FALSE(Schema::CompileText(R"({"type": "strin"})").ok());
  EXPECT_FALSE(Schema::CompileText(R"({"type": ["string", 3]})").ok());
}

TEST(JsonSchemaTest, OneOfNeedsExactlyOne) {
  Schema s = S(R"({"oneOf": [{"type": "integer"}, {"minimum": 5}]})");
  EXPECT_TRUE(Valid(s, "3"));    // only the first
  EXPECT_TRUE(Valid(s, "5.5"));  // only the second
  EXPECT_EQ(V(s, "7"),
            std::vector<std::string>{"(root): matches more than one schema in oneOf (0 and 1)"});
  EXPECT_EQ(V(s, "4.5"), std::vector<std::string>{
                             "(root): does not match any schema in oneOf ([0] expected integer, "
                             "got number; [1] must be >= 5 (minimum), got 4.5)"});
}

TEST(JsonSchemaTest, AnyOfAllOfNot) {
  Schema any = S(R"({"anyOf": [{"type": "string"}, {"type": "object", "required": ["a"]}]})");
  EXPECT_TRUE(Valid(any, "\"x\""));
  EXPECT_TRUE(Valid(any, R"({"a": 1})"));
  EXPECT_EQ(V(any, R"({"b": 1})"),
            std::vector<std::string>{"(root): does not match any schema in anyOf ([0] expected "
                                     "string, got object; [1] missing required property \"a\")"});
  Schema all = S(R"({"allOf": [{"minimum": 1}, {"maximum": 3}]})");
  EXPECT_TRUE(Valid(all, "2"));
  EXPECT_EQ(V(all, "4").size(), 1u);
  Schema no = S(R"({"not": {"type": "null"}})");
  EXPECT_TRUE(Valid(no, "0"));
  EXPECT_EQ(V(no, "null"), std::vector<std::string>{"(root): must not match the schema in not"});
  Schema cond = S(R"({"if": {"properties": {"k": {"const": "a"}}},
                      "then": {"required": ["a"]}, "else": {"required": ["b"]}})");
  EXPECT_TRUE(Valid(cond, R"({"k": "a", "a": 1})"));
  EXPECT_FALSE(Valid(cond, R"({"k": "a", "b": 1})"));
  EXPECT_TRUE(Valid(cond, R"({"k": "z", "b": 1})"));
}

TEST(JsonSchemaTest, EnumConstCompareNumbersByValue) {
  Schema e = S(R"({"enum": [1, "a", null, {"x": [1, 2]}]})");
  for (const char* ok : {"1", "1.0", "10e-1", "\"a\"", "null", R"({"x": [1.0, 2]})"}) {
    EXPECT_TRUE(Valid(e, ok)) << ok;
  }
  for (const char* bad : {"2", "\"b\"", "false", R"({"x": [2, 1]})", "[1]"}) {
    EXPECT_FALSE(Valid(e, bad)) << bad;
  }
  Schema c = S(R"({"const": {"a": 1, "b": 2}})");
  EXPECT_TRUE(Valid(c, R"({"b": 2, "a": 1})"));
  EXPECT_FALSE(Valid(c, R"({"a": 1})"));
  EXPECT_FALSE(Valid(S(R"({"enum": []})"), "1"));
}

TEST(JsonSchemaTest, StringsCountCodePointsAndPatternsAreEcmaLike) {
  Schema len = S(R"({"minLength": 2, "maxLength": 5})");
  EXPECT_TRUE(Valid(len, "\"h\u00e9llo\""));  // 5 code points, 6 bytes
  EXPECT_TRUE(Valid(len, "\"\U0001F600\U0001F600\""));
  EXPECT_FALSE(Valid(len, "\"\U0001F600\""));
  EXPECT_FALSE(Valid(len, "\"abcdef\""));
  Schema digits = S(R"({"pattern": "^\\d+$"})");
  EXPECT_TRUE(Valid(digits, "\"123\""));
  EXPECT_FALSE(Valid(digits, "\"\u0661\u0662\""));          // Arabic-Indic digits: \d is ASCII
  EXPECT_FALSE(Valid(digits, "\"12\\n\""));                 // `$` is the very end
  EXPECT_TRUE(Valid(S(R"({"pattern": "b"})"), "\"abc\""));  // unanchored search
  EXPECT_TRUE(Valid(S(R"({"pattern": "^\\u00e9$"})"), "\"\u00e9\""));
  auto bad = Schema::CompileText(R"({"properties": {"p": {"pattern": "(unclosed"}}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(ReasonOf(bad.status()), "invalid_request");
  EXPECT_NE(bad.status().message().find("/properties/p/pattern"), absl::string_view::npos);
}

TEST(JsonSchemaTest, CatastrophicPatternIsBounded) {
  Schema s = S(R"({"pattern": "^(a+)+$"})");
  std::string subject(40, 'a');
  subject += "!";
  auto violations = s.Validate(json::Value::String(subject));
  ASSERT_EQ(violations.size(), 1u);
  EXPECT_EQ(violations[0].message, "matching the pattern exceeded its work limit");
}

TEST(JsonSchemaTest, Objects) {
  Schema s = S(R"({"properties": {"a": {"type": "integer"}},
                   "patternProperties": {"^x-": {"type": "string"}},
                   "additionalProperties": {"type": "boolean"},
                   "minProperties": 1, "maxProperties": 3,
                   "dependentRequired": {"a": ["b"]}})");
  EXPECT_TRUE(Valid(s, R"({"x-1": "s", "other": true})"));
  EXPECT_TRUE(Valid(s, R"({"a": 1, "b": false})"));
  EXPECT_EQ(V(s, R"({"a": 1})"),
            std::vector<std::string>{"(root): property \"a\" requires property \"b\" "
                                     "(dependentRequired)"});
  EXPECT_EQ(V(s, R"({"x-1": 2})"), std::vector<std::string>{"/x-1: expected string, got integer"});
  EXPECT_EQ(V(s, R"({"q": 2})"), std::vector<std::string>{"/q: expected boolean, got integer"});
  EXPECT_FALSE(Valid(s, "{}"));
  EXPECT_FALSE(Valid(s, R"({"c": true, "d": true, "e": true, "f": true})"));
  // Pointer escapes in paths.
  Schema strict = S(R"({"additionalProperties": false})");
  EXPECT_EQ(
      V(strict, R"({"a/b~c": 1})"),
      std::vector<std::string>{"/a~1b~0c: unexpected property (additionalProperties is false)"});
  Schema names = S(R"({"propertyNames": {"maxLength": 2}})");
  EXPECT_TRUE(Valid(names, R"({"ab": 1})"));
  EXPECT_FALSE(Valid(names, R"({"abc": 1})"));
}

TEST(JsonSchemaTest, Arrays) {
  Schema s = S(R"({"prefixItems": [{"type": "string"}], "items": {"type": "integer"},
                   "minItems": 1, "maxItems": 3, "uniqueItems": true})");
  EXPECT_TRUE(Valid(s, R"(["a", 1, 2])"));
  EXPECT_EQ(V(s, R"(["a", 1, "b"])"), std::vector<std::string>{"/2: expected integer, got string"});
  EXPECT_FALSE(Valid(s, "[]"));
  EXPECT_FALSE(Valid(s, R"(["a", 1, 2, 3])"));
  EXPECT_EQ(V(s, R"(["a", 1, 1.0])"),
            std::vector<std::string>{"(root): items 1 and 2 are equal (uniqueItems)"});
  EXPECT_FALSE(Valid(S(R"({"uniqueItems": true})"), R"([{"a": 1, "b": 2}, {"b": 2, "a": 1}])"));
  EXPECT_TRUE(Valid(S(R"({"uniqueItems": true})"), R"([[1], [1, 1], "1", 1])"));
  // Tuple form of earlier drafts.
  Schema tuple = S(R"({"items": [{"type": "string"}], "additionalItems": false})");
  EXPECT_TRUE(Valid(tuple, R"(["a"])"));
  EXPECT_FALSE(Valid(tuple, R"(["a", "b"])"));
  Schema contains = S(R"({"contains": {"type": "null"}, "maxContains": 1})");
  EXPECT_TRUE(Valid(contains, "[1, null]"));
  EXPECT_FALSE(Valid(contains, "[1]"));
  EXPECT_FALSE(Valid(contains, "[null, null]"));
}

TEST(JsonSchemaTest, BooleanSchemasAndUnknownKeywords) {
  EXPECT_TRUE(Valid(S("true"), "[1, {}]"));
  EXPECT_EQ(V(S("false"), "1"), std::vector<std::string>{"(root): no value is allowed here"});
  Schema s = S(R"({"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "t",
                   "description": "d", "default": 3, "format": "uri", "x-vendor": {"type": 1},
                   "examples": [1], "properties": {"p": {"type": "string", "required": true}}})");
  EXPECT_TRUE(Valid(s, R"({"p": "not a uri"})"));
  EXPECT_FALSE(Schema::CompileText("3").ok());
  EXPECT_FALSE(Schema::CompileText(R"({"minLength": "5"})").ok());
  EXPECT_FALSE(Schema::CompileText(R"({"minLength": -1})").ok());
  EXPECT_FALSE(Schema::CompileText(R"({"anyOf": []})").ok());
  EXPECT_FALSE(Schema::CompileText("{").ok());
  EXPECT_TRUE(Schema::CompileText(R"({"minLength": 2.0})").ok());
}

TEST(JsonSchemaTest, LocalRefs) {
  Schema s = S(R"({"$defs": {"edit": {"type": "object", "required": ["old_text"],
                                       "properties": {"old_text": {"type": "string"}}}},
                   "definitions": {"n": {"type": "integer"}},
                   "properties": {"edits": {"type": "array", "items": {"$ref": "#/$defs/edit"}},
                                  "count": {"$ref": "#/definitions/n"}}})");
  EXPECT_TRUE(Valid(s, R"({"edits": [{"old_text": "a"}], "count": 1})"));
  EXPECT_EQ(V(s, R"({"edits": [{"old_text": "a"}, {"old_text": null}]})"),
            std::vector<std::string>{"/edits/1/old_text: expected string, got null"});
  // Recursion through "#".
  Schema tree = S(R"({"type": "object", "properties": {"kids": {"type": "array",
                       "items": {"$ref": "#"}}}, "additionalProperties": false})");
  EXPECT_TRUE(Valid(tree, R"({"kids": [{"kids": []}, {}]})"));
  EXPECT_EQ(V(tree, R"({"kids": [{"kids": [{"bad": 1}]}]})"),
            std::vector<std::string>{
                "/kids/0/kids/0/bad: unexpected property (additionalProperties is false)"});
  // A cycle that consumes no value is caught, not looped.
  Schema cycle = S(R"({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
                       "$ref": "#/$defs/a"})");
  EXPECT_FALSE(Valid(cycle, "1"));
  EXPECT_FALSE(Schema::CompileText(R"({"$ref": "https://example.com/s.json"})").ok());
  EXPECT_FALSE(Schema::CompileText(R"({"$ref": "#/$defs/missing"})").ok());
  EXPECT_FALSE(Schema::CompileText(R"({"$ref": "#anchor"})").ok());
  EXPECT_TRUE(Schema::CompileText(R"({"$defs": {"a~b/c": {}}, "$ref": "#/$defs/a~0b~1c"})").ok());
}

TEST(JsonSchemaTest, WorkIsBounded) {
  // 2^30 paths through nested anyOf: the step budget ends it.
  std::string defs;
  for (int i = 0; i < 30; ++i) {
    defs += "\"d" + std::to_string(i) + "\": {\"anyOf\": [{\"$ref\": \"#/$defs/d" +
            std::to_string(i + 1) + "\"}, {\"$ref\": \"#/$defs/d" + std::to_string(i + 1) +
            "\"}]},";
  }
  defs += "\"d30\": false";
  Schema s = S("{\"$defs\": {" + defs + "}, \"$ref\": \"#/$defs/d0\"}");
  auto violations = s.Validate(J("1"));
  ASSERT_EQ(violations.size(), 1u);
  EXPECT_EQ(violations[0].message, "validation exceeded its work limit");
  // Too many nodes.
  CompileOptions small;
  small.max_nodes = 3;
  EXPECT_FALSE(Schema::Compile(J(R"({"properties": {"a": {}, "b": {}, "c": {}}})"), small).ok());
}

TEST(JsonSchemaTest, ViolationsAreCapped) {
  Schema s = S(R"({"items": {"type": "string"}})");
  std::string many = "[";
  for (int i = 0; i < 500; ++i) many += (i ? ",1" : "1");
  many += "]";
  auto violations = s.Validate(J(many));
  ASSERT_EQ(violations.size(), 50u);
  EXPECT_EQ(violations.back().message, "further violations omitted");
}

TEST(JsonSchemaTest, PropertyTypes) {
  Schema s = S(R"({"$defs": {"n": {"type": "number"}},
                   "properties": {"s": {"type": "string"}, "o": {"type": ["integer", "null"]},
                                  "e": {"enum": ["a", 1]}, "r": {"$ref": "#/$defs/n"},
                                  "u": {"anyOf": [{"type": "array"}, {"type": "boolean"}]},
                                  "none": {"description": "x"}},
                   "additionalProperties": {"type": "object"}})");
  EXPECT_EQ(s.PropertyTypes("s"), kTypeString);
  EXPECT_EQ(s.PropertyTypes("o"), kTypeInteger | kTypeNull);
  EXPECT_EQ(s.PropertyTypes("e"), kTypeString | kTypeInteger);
  EXPECT_EQ(s.PropertyTypes("r"), kTypeNumber);
  EXPECT_EQ(s.PropertyTypes("u"), kTypeArray | kTypeBoolean);
  EXPECT_EQ(s.PropertyTypes("none"), 0);
  EXPECT_EQ(s.PropertyTypes("other"), kTypeObject);
  EXPECT_EQ(Schema().PropertyTypes("x"), 0);
}

}  // namespace
}  // namespace gantry::json_schema
