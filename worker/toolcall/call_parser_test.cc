// Per-protocol parsing through the whole stream (parser + validation), with real clients'
// tools: happy paths, several calls, text around calls, malformed forms, reasoning, and
// the same events for every split of the text.
#include "worker/toolcall/call_parser.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "worker/toolcall/test_events.h"

namespace gantry::toolcall {
namespace {

using toolcall_testing::ExpectSplitInvariant;
using toolcall_testing::RunText;
using V = std::vector<std::string>;

ParserOptions Thinking(bool starts_inside = false) {
  ParserOptions options;
  options.reasoning = true;
  options.starts_in_reasoning = starts_inside;
  return options;
}

// ---------------------------------------------------------------------------------------
// hermes_json

constexpr ToolProtocol kHermes = ToolProtocol::kHermesJson;

TEST(HermesJsonTest, OneCallAfterText) {
  const std::string text =
      "I'll read it.\n<tool_call>\n{\"name\": \"read\", \"arguments\": {\"filePath\": "
      "\"/w/index.html\", \"limit\": 20}}\n</tool_call>";
  auto out = RunText(kHermes, text);
  EXPECT_EQ(out.error, "");
  EXPECT_EQ(out.events,
            (V{"text:I'll read it.\n", R"(call 0 read {"filePath":"/w/index.html","limit":20})"}));
  ExpectSplitInvariant(kHermes, text);
}

TEST(HermesJsonTest, SeveralCallsAndTextAround) {
  const std::string text =
      "Two reads.<tool_call>{\"name\": \"read\", \"arguments\": {\"filePath\": \"a\"}}"
      "</tool_call>\n<tool_call>{\"name\": \"glob\", \"arguments\": {\"pattern\": \"*.md\"}}"
      "</tool_call> done <tool";
  auto out = RunText(kHermes, text);
  EXPECT_EQ(out.error, "");
  EXPECT_EQ(out.events, (V{"text:Two reads.", R"(call 0 read {"filePath":"a"})", "text:\n",
                           R"(call 1 glob {"pattern":"*.md"})", "text: done <tool"}));
  ExpectSplitInvariant(kHermes, text);
}

TEST(HermesJsonTest, CloseTagInsideAJsonStringIsContent) {
  const std::string text =
      "<tool_call>{\"name\": \"write\", \"arguments\": {\"filePath\": \"t.md\", \"content\": "
      "\"use <tool_call>...</tool_call> \\\"tags\\\"\"}}</tool_call>";
  auto out = RunText(kHermes, text);
  EXPECT_EQ(out.error, "");
  ASSERT_EQ(out.events.size(), 1u);
  EXPECT_EQ(
      out.events[0],
      R"(call 0 write {"filePath":"t.md","content":"use <tool_call>...</tool_call> \"tags\""})");
  ExpectSplitInvariant(kHermes, text);
}

TEST(HermesJsonTest, NoParametersToolAndMissingArguments) {
  auto out = RunText(kHermes, "<tool_call>{\"name\": \"get_goal\"}</tool_call>");
  EXPECT_EQ(out.error, "");
  EXPECT_EQ(out.events, (V{"call 0 get_goal {}"}));
  out = RunText(
      kHermes, "<tool_call>{\"name\": \"list_agents\", \"arguments\": {\"any\": [1]}}</tool_call>");
  EXPECT_EQ(out.events, (V{R"(call 0 list_agents {"any":[1]})"}));
}

TEST(HermesJsonTest, Malformed) {
  struct Case {
    std::string text;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"ok <tool_call>{\"name\": \"read\", \"arguments\": {\"filePath\": \"a\"}}",
       "invalid_tool_call: tool call 0: hermes_json: unterminated <tool_call>"},
      {"<tool_call>{\"name\": \"read\", \"arguments\": {\"filePath\": \"a\"}</tool_call>",
       "invalid_tool_call: tool call 0: hermes_json: the body of <tool_call> is not valid JSON"},
      {"<tool_call>{\"arguments\": {}}</tool_call>",
       "invalid_tool_call: tool call 0: hermes_json: a tool call needs \"name\""},
      {"<tool_call>{\"name\": \"read\", \"arguments\": \"{}\"}</tool_call>",
       "invalid_tool_call: tool call 0: hermes_json: the arguments of \"read\" must be a JSON "
       "object"},
      {"<tool_call>{\"name\": \"read\", \"arguments\": {}, \"id\": 1}</tool_call>",
       "invalid_tool_call: tool call 0: hermes_json: call to \"read\" has an unexpected member"},
      {"<tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call>",
       "invalid_tool_call: tool call 0 (\"rm_rf\"): not an advertised tool (advertised: bash, "},
      {"<tool_call>{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\", \"timeout\": 0}}"
       "</tool_call>",
       "invalid_tool_call: tool call 0: the arguments of \"bash\" do not match its schema: "
       "/timeout: must be > 0 (exclusiveMinimum), got 0"},
      {"<tool_call>{\"name\": \"read_file\", \"arguments\": {\"file_path\": \"a\", \"offset\": "
       "\"5\"}}</tool_call>",
       "invalid_tool_call: tool call 0: the arguments of \"read_file\" do not match its schema: "
       "/offset: expected integer or null, got string"},
  };
  for (const Case& c : cases) {
    auto out = RunText(kHermes, c.text);
    EXPECT_EQ(out.error.substr(0, c.error.size()), c.error) << c.text << "\n" << out.error;
    ExpectSplitInvariant(kHermes, c.text);
  }
  // Text before the malformed call still went out.
  EXPECT_EQ(RunText(kHermes, cases[0].text).events, (V{"text:ok "}));
}

TEST(HermesJsonTest, ReasoningIsSplitOutAndInterleaves) {
  const std::string text =
      "<think>\nplan A</think>\n<tool_call>{\"name\": \"read\", \"arguments\": {\"filePath\": "
      "\"a\"}}</tool_call><think>now B <tool_call>not a call</tool_call></think>"
      "<tool_call>{\"name\": \"read\", \"arguments\": {\"filePath\": \"b\"}}</tool_call>";
  auto out = RunText(kHermes, text, Thinking());
  EXPECT_EQ(out.error, "");
  EXPECT_EQ(out.events, (V{"reasoning:\nplan A", "text:\n", R"(call 0 read {"filePath":"a"})",
                           "reasoning:now B <tool_call>not a call</tool_call>",
                           R"(call 1 read {"filePath":"b"})"}));
  ExpectSplitInvariant(kHermes, text, Thinking());
  // Without the option, <think> is plain text.
  EXPECT_EQ(RunText(kHermes, "<think>x</think>y").events, (V{"text:<think>x</think>y"}));
  // A prompt that opened <think> already.
  const std::string inside = "still thinking</think>The answer.";
  EXPECT_EQ(RunText(kHermes, inside, Thinking(true)).events,
            (V{"reasoning:still thinking", "text:The answer."}));
  ExpectSplitInvariant(kHermes, inside, Thinking(true));
  // Generation that stops inside reasoning is not an error.
  EXPECT_EQ(RunText(kHermes, "<think>cut off", Thinking()).events, (V{"reasoning:cut off"}));
}

TEST(HermesJsonTest, Utf8IsNeverSplitAndInvalidBytesAreReplaced) {
  const std::string text =
      "caf\xC3\xA9 \xF0\x9F\x98\x80 <tool_call>{\"name\": \"read\", "
      "\"arguments\": {\"filePath\": \"\xC3\xA9\"}}</tool_call>";
  auto out = RunText(kHermes, text);
  EXPECT_EQ(out.events,
            (V{"text:caf\xC3\xA9 \xF0\x9F\x98\x80 ", "call 0 read {\"filePath\":\"\xC3\xA9\"}"}));
  ExpectSplitInvariant(kHermes, text);
  EXPECT_EQ(RunText(kHermes,
                    "a\xFF"
                    "b\xC3")
                .events,
            (V{"text:a\xEF\xBF\xBD"
               "b\xEF\xBF\xBD"}));
  ExpectSplitInvariant(kHermes,
                       "a\xFF"
                       "b\xC3");
}

TEST(HermesJsonTest, NoToolsAdvertisedMeansNoParsing) {
  ParserOptions options;
  options.parse_calls = false;
  auto out = RunText(kHermes, "<tool_call>{\"name\": \"read\"}</tool_call>", options);
  EXPECT_EQ(out.error, "");
  EXPECT_EQ(out.events, (V{"text:<tool_call>{\"name\": \"read\"}</tool_call>"}));
}

// ---------------------------------------------------------------------------------------
// qwen3_coder_xml

constexpr ToolProtocol kQwenXml = ToolProtocol::kQwen3CoderXml;

TEST(Qwen3CoderXmlTest, ValuesAreTypedByTheSchema) {
  const std::string text =
      "Running it.\n<tool_call>\n<function=run_shell_command>\n<parameter=command>\n"
      "ls -la \"my dir\"\n</parameter>\n<parameter=timeout>\n5000\n</parameter>\n"
      "<parameter=is_background>\nfalse\n</parameter>\n</function>\n</tool_call>";
  auto out = RunText(kQwenXml, text);
  EXPECT_EQ(out.error, "");
  EXPECT_EQ(
      out.events,
      (V{"text:Running it.\n",
         R"(call 0 run_shell_command {"command":"ls -la \"my dir\"","timeout":5000,"is_background":false})"}));
  ExpectSplitInvariant(kQwenXml, text);
}

TEST(Qwen3CoderXmlTest, StringsStayStringsAndKeepInnerNewlines) {
  const std::string text =
      "<tool_call>\n<function=write_file>\n<parameter=file_path>\n123\n</parameter>\n"
      "<parameter=content>\n\nline 1\n</tool_call> is fine here\n{\"a\": 1}\n\n</parameter>\n"
      "</function>\n</tool_call>";
  auto out = RunText(kQwenXml, text);
  EXPECT_EQ(out.error, "");
  EXPECT_EQ(
      out.events,
      (V{R"(call 0 write_file {"file_path":"123","content":"\nline 1\n</tool_call> is fine here\n{\"a\": 1}\n"})"}));
  ExpectSplitInvariant(kQwenXml, text);
}

TEST(Qwen3CoderXmlTest, NullableAndSeveralCalls) {
  const std::string text =
      "<tool_call>\n<function=read_file>\n<parameter=file_path>\n/a\n</parameter>\n"
      "<parameter=offset>\nnull\n</parameter>\n<parameter=limit>\n10\n</parameter>\n"
      "</function>\n</tool_call>\n<tool_call>\n<function=get_goal>\n</function>\n</tool_call>"
      " bye";
  auto out = RunText(kQwenXml, text);
  EXPECT_EQ(out.error, "");
  EXPECT_EQ(out.events, (V{R"(call 0 read_file {"file_path":"/a","offset":null,"limit":10})",
                           "text:\n", "call 1 get_goal {}", "text: bye"}));
  ExpectSplitInvariant(kQwenXml, text);
}

TEST(Qwen3CoderXmlTest, Malformed) {
  struct Case {
    std::string text;
    std::string error;
  };
  const std::string open =
      "<tool_call>\n<function=write_file>\n<parameter=file_path>\na\n</parameter>\n";
  const std::vector<Case> cases = {
      // A literal </parameter> inside a value: never a partial call.
      {open + "<parameter=content>\nx</parameter>y\n</parameter>\n</function>\n</tool_call>",
       "invalid_tool_call: tool call 0: qwen3_coder_xml: expected <parameter=KEY> or </function> "
       "in the call to \"write_file\", got \"y\\n</parameter>"},
      {open + "<parameter=content>\nunfinished",
       "invalid_tool_call: tool call 0: qwen3_coder_xml: unterminated <tool_call> to "
       "\"write_file\""},
      {open + "</function>", "invalid_tool_call: tool call 0: qwen3_coder_xml: unterminated"},
      {open + "</function>\nmore</tool_call>",
       "invalid_tool_call: tool call 0: qwen3_coder_xml: expected </tool_call> after </function>"},
      {"<tool_call>\n{\"name\": \"read\"}</tool_call>",
       "invalid_tool_call: tool call 0: qwen3_coder_xml: expected <function=NAME> after "
       "<tool_call>"},
      {open + "<parameter=file_path>\nb\n</parameter>\n</function>\n</tool_call>",
       "invalid_tool_call: tool call 0: qwen3_coder_xml: parameter \"file_path\" appears twice"},
      {"<tool_call>\n<function=run_shell_command>\n<parameter=command>\nls\n</parameter>\n"
       "<parameter=timeout>\nfive\n</parameter>\n</function>\n</tool_call>",
       "invalid_tool_call: tool call 0: qwen3_coder_xml: parameter \"timeout\" of "
       "\"run_shell_command\" is declared non-string but its value is not JSON"},
      {"<tool_call>\n<function=write_file>\n<parameter=file_path>\na\n</parameter>\n</function>\n"
       "</tool_call>",
       "invalid_tool_call: tool call 0: the arguments of \"write_file\" do not match its schema: "
       "(root): missing required property \"content\""},
      {"<tool_call>\n<function=nope>\n</function>\n</tool_call>",
       "invalid_tool_call: tool call 0 (\"nope\"): not an advertised tool"},
      {"<tool_call>\n<function=read\n",
       "invalid_tool_call: tool call 0: qwen3_coder_xml: "
       "unterminated <function=NAME> tag"},
  };
  for (const Case& c : cases) {
    auto out = RunText(kQwenXml, c.text);
    EXPECT_EQ(out.error.substr(0, c.error.size()), c.error) << c.text << "\n" << out.error;
    EXPECT_TRUE(out.events.empty()) << c.text;
    ExpectSplitInvariant(kQwenXml, c.text);
  }
}

TEST(Qwen3CoderXmlTest, ReasoningThenCall) {
  const std::string text =
      "<think>need ls</think>\n\n<tool_call>\n<function=bash>\n<parameter=command>\nls\n"
      "</parameter>\n</function>\n</tool_call>";
  auto out = RunText(kQwenXml, text, Thinking());
  EXPECT_EQ(out.events, (V{"reasoning:need ls", "text:\n\n", R"(call 0 bash {"command":"ls"})"}));
  ExpectSplitInvariant(kQwenXml, text, Thinking());
}

// ---------------------------------------------------------------------------------------
// llama31_json

constexpr ToolProtocol kLlama = ToolProtocol::kLlama31Json;

TEST(Llama31JsonTest, WholeMessageIsTheCall) {
  for (const std::string& text :
       {std::string("{\"name\": \"read\", \"parameters\": {\"filePath\": \"/a\"}}"),
        std::string(
            "\n <|python_tag|>{\"name\": \"read\", \"parameters\": {\"filePath\": \"/a\"}}"),
        std::string("{ \"name\": \"read\", \"arguments\": {\"filePath\": \"/a\"}}\n")}) {
    auto out = RunText(kLlama, text);
    EXPECT_EQ(out.error, "") << text;
    EXPECT_EQ(out.events, (V{R"(call 0 read {"filePath":"/a"})"})) << text;
    ExpectSplitInvariant(kLlama, text);
  }
}

TEST(Llama31JsonTest, SeveralCallsSeparatedBySemicolons) {
  const std::string text =
      "{\"name\": \"read\", \"parameters\": {\"filePath\": \"a\"}}; {\"name\": \"glob\", "
      "\"parameters\": {\"pattern\": \"*\"}}";
  auto out = RunText(kLlama, text);
  EXPECT_EQ(out.error, "");
  EXPECT_EQ(out.events, (V{R"(call 0 read {"filePath":"a"})", R"(call 1 glob {"pattern":"*"})"}));
  ExpectSplitInvariant(kLlama, text);
}

TEST(Llama31JsonTest, OtherMessagesAreText) {
  for (const std::string& text : {std::string("Hello! {\"name\": \"read\", \"parameters\": {}}"),
                                  std::string("  {\"answer\": 42}"), std::string("{"),
                                  std::string("<|python"), std::string("")}) {
    auto out = RunText(kLlama, text);
    EXPECT_EQ(out.error, "") << text;
    if (text.empty()) {
      EXPECT_TRUE(out.events.empty());
    } else {
      EXPECT_EQ(out.events, (V{"text:" + text})) << text;
    }
    ExpectSplitInvariant(kLlama, text);
  }
}

TEST(Llama31JsonTest, Malformed) {
  struct Case {
    std::string text;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"{\"name\": \"read\", \"parameters\": {\"filePath\": \"a\"}",
       "invalid_tool_call: tool call 0: llama31_json: unterminated tool call object"},
      {"{\"name\": \"read\", \"parameters\": {\"filePath\": \"a\"}} Let me know!",
       "invalid_tool_call: tool call 1: llama31_json: unexpected text after a tool call"},
      {"{\"name\": 5, \"parameters\": {}}",
       "invalid_tool_call: tool call 0: llama31_json: a tool call needs \"name\""},
      {"<|python_tag|>brave_search.call(query=\"x\")",
       "invalid_tool_call: tool call 0: llama31_json: expected a JSON tool call object"},
      {"{\"name\": \"read\", \"parameters\": {}, \"arguments\": {}}",
       "invalid_tool_call: tool call 0: llama31_json: call to \"read\" has its arguments twice"},
      {"{\"name\": \"read\", \"parameters\": {}}",
       "invalid_tool_call: tool call 0: the arguments of \"read\" do not match its schema"},
  };
  for (const Case& c : cases) {
    auto out = RunText(kLlama, c.text);
    EXPECT_EQ(out.error.substr(0, c.error.size()), c.error) << c.text << "\n" << out.error;
    ExpectSplitInvariant(kLlama, c.text);
  }
}

TEST(Llama31JsonTest, ReasoningBeforeTheCall) {
  const std::string text =
      "<think>use read</think>\n{\"name\": \"read\", \"parameters\": {\"filePath\": \"a\"}}";
  auto out = RunText(kLlama, text, Thinking());
  EXPECT_EQ(out.error, "");
  EXPECT_EQ(out.events, (V{"reasoning:use read", R"(call 0 read {"filePath":"a"})"}));
  ExpectSplitInvariant(kLlama, text, Thinking());
}

// ---------------------------------------------------------------------------------------
// mistral_tool_calls

constexpr ToolProtocol kMistral = ToolProtocol::kMistralToolCalls;

TEST(MistralToolCallsTest, ListOfCalls) {
  const std::string text =
      "Checking.[TOOL_CALLS] [{\"name\": \"read\", \"arguments\": {\"filePath\": \"a\"}, "
      "\"id\": \"abcDEF123\"}, {\"name\": \"grep\", \"arguments\": {\"pattern\": \"]\"}}]";
  auto out = RunText(kMistral, text);
  EXPECT_EQ(out.error, "");
  EXPECT_EQ(out.events, (V{"text:Checking.", R"(call 0 read {"filePath":"a"})",
                           R"(call 1 grep {"pattern":"]"})"}));
  ExpectSplitInvariant(kMistral, text);
}

TEST(MistralToolCallsTest, Malformed) {
  struct Case {
    std::string text;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"[TOOL_CALLS] hello",
       "invalid_tool_call: tool call 0: mistral_tool_calls: expected a JSON "
       "array after [TOOL_CALLS]"},
      {"[TOOL_CALLS][{\"name\": \"read\", \"arguments\": {}",
       "invalid_tool_call: tool call 0: mistral_tool_calls: unterminated [TOOL_CALLS] list"},
      {"[TOOL_CALLS][]",
       "invalid_tool_call: tool call 0: mistral_tool_calls: [TOOL_CALLS] must be "
       "followed by a non-empty JSON array"},
      {"[TOOL_CALLS][{\"name\": \"read\", \"arguments\": {\"filePath\": 1}}]",
       "invalid_tool_call: tool call 0: the arguments of \"read\" do not match its schema: "
       "/filePath: expected string, got integer"},
      {"[TOOL_CALLS]", "invalid_tool_call: tool call 0: mistral_tool_calls: [TOOL_CALLS] without"},
  };
  for (const Case& c : cases) {
    auto out = RunText(kMistral, c.text);
    EXPECT_EQ(out.error.substr(0, c.error.size()), c.error) << c.text << "\n" << out.error;
    ExpectSplitInvariant(kMistral, c.text);
  }
}

// ---------------------------------------------------------------------------------------
// The parser alone.

TEST(ToolCallParserTest, HoldsOnlyWhatMightStartAMarker) {
  ToolCallParser parser(kHermes, {});
  std::vector<ParsedEvent> events;
  ASSERT_TRUE(parser.Feed("Hello <tool_c", &events).ok());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].text, "Hello ");
  ASSERT_TRUE(parser.Feed("omplete is not a tag", &events).ok());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].text, "<tool_complete is not a tag");
  ASSERT_TRUE(parser.Feed("<tool_call>{\"name\": \"x\"", &events).ok());
  EXPECT_EQ(events.size(), 2u);  // an open call emits nothing until it closes
  ASSERT_TRUE(parser.Feed("}</tool_call>", &events).ok());
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[2].kind, ParsedEvent::Kind::kCall);
  EXPECT_EQ(events[2].call.name, "x");
  EXPECT_TRUE(parser.Finish(&events).ok());
}

TEST(ToolCallParserTest, ErrorsAreSticky) {
  ToolCallParser parser(kMistral, {});
  std::vector<ParsedEvent> events;
  absl::Status first = parser.Feed("[TOOL_CALLS]x", &events);
  EXPECT_EQ(ReasonOf(first), "invalid_tool_call");
  EXPECT_EQ(parser.Feed("more", &events), first);
  EXPECT_EQ(parser.Finish(&events), first);
}

TEST(ToolCallParserTest, CallSizeIsBounded) {
  ParserOptions options;
  options.max_call_bytes = 64;
  ToolCallParser parser(kHermes, options);
  std::vector<ParsedEvent> events;
  absl::Status status = parser.Feed("<tool_call>" + std::string(100, ' '), &events);
  EXPECT_EQ(ReasonOf(status), "invalid_tool_call");
}

TEST(ToolProtocolTest, Names) {
  for (const char* name :
       {"", "hermes_json", "qwen3_coder_xml", "llama31_json", "mistral_tool_calls"}) {
    auto protocol = ParseToolProtocol(name);
    ASSERT_TRUE(protocol.ok()) << name;
    EXPECT_EQ(ToolProtocolName(*protocol), name);
  }
  EXPECT_EQ(ReasonOf(ParseToolProtocol("qwen2.5").status()), "invalid_request");
}

}  // namespace
}  // namespace gantry::toolcall
