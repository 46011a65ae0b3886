#include "router/sentence_chunker.h"

#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "common/utf8.h"
#include "gtest/gtest.h"

namespace gantry::router {
namespace {

using Chunks = std::vector<std::string>;

// Feeds `deltas` one by one, then flushes; every chunk in order (the flush last, if any).
Chunks ChunksOf(const std::vector<std::string>& deltas, size_t max = kSentenceChunkMaxBytes) {
  SentenceChunker chunker(max);
  Chunks out;
  for (const auto& d : deltas) chunker.Add(d, &out);
  std::string rest = chunker.Flush();
  if (!rest.empty()) out.push_back(rest);
  return out;
}

TEST(SentenceChunkerTest, TokenFragmentsBecomeSentences) {
  EXPECT_EQ(ChunksOf({"Hel", "lo", ", wor", "ld.", " How", " are", " you?", " Fine"}),
            (Chunks{"Hello, world. ", "How are you? ", "Fine"}));
}

TEST(SentenceChunkerTest, HeldUntilTheNextByteDecides) {
  SentenceChunker chunker;
  Chunks out;
  chunker.Add("Pi is 3.", &out);
  EXPECT_TRUE(out.empty());  // "3." could be "3.14"
  chunker.Add("14 exactly!", &out);
  EXPECT_TRUE(out.empty());
  chunker.Add("\tNext", &out);
  EXPECT_EQ(out, (Chunks{"Pi is 3.14 exactly!\t"}));
  EXPECT_EQ(chunker.Flush(), "Next");
  EXPECT_TRUE(chunker.empty());
}

TEST(SentenceChunkerTest, TakeWordsKeepsTheWordThatMayStillGrow) {
  SentenceChunker chunker;
  Chunks out;
  EXPECT_EQ(chunker.TakeWords(), "");
  chunker.Add("Hello there, thi", &out);
  EXPECT_EQ(chunker.TakeWords(), "Hello there, ");
  EXPECT_EQ(chunker.Flush(), "thi");
  chunker.Add("Supercalifragilistic", &out);  // no whitespace at all: all of it
  EXPECT_EQ(chunker.TakeWords(), "Supercalifragilistic");
  EXPECT_TRUE(chunker.empty());
}

TEST(SentenceChunkerTest, ClosingQuotesStayWithTheirSentence) {
  EXPECT_EQ(ChunksOf({"He said \"stop.\" Then (he left.) And \u201cyes!\u201d ok"}),
            (Chunks{"He said \"stop.\" ", "Then (he left.) ", "And \u201cyes!\u201d ", "ok"}));
}

TEST(SentenceChunkerTest, EllipsisAndNewlines) {
  EXPECT_EQ(ChunksOf({"Well\u2026 maybe", "\n- item one\n- item two"}),
            (Chunks{"Well\u2026 ", "maybe\n", "- item one\n", "- item two"}));
}

TEST(SentenceChunkerTest, CjkSentenceEndsNeedNoSpace) {
  EXPECT_EQ(ChunksOf({"\u4eca\u65e5\u306f\u3002\u5143\u6c17\uff1f\u300c\u306f\u3044\uff01\u300d\u3067\u3059"}),
            (Chunks{"\u4eca\u65e5\u306f\u3002", "\u5143\u6c17\uff1f",
                    "\u300c\u306f\u3044\uff01\u300d", "\u3067\u3059"}));
}

TEST(SentenceChunkerTest, CapCutsAtTheLastSpace) {
  Chunks out = ChunksOf({"aaaa bbbb cccc dddd eeee"}, 12);
  EXPECT_EQ(out, (Chunks{"aaaa bbbb ", "cccc dddd ", "eeee"}));
}

TEST(SentenceChunkerTest, CapNeverSplitsACharacter) {
  // 30 two- and three-byte characters without any space, in 1-byte deltas (a worker
  // may split a character between deltas).
  std::string text;
  for (int i = 0; i < 15; ++i) text += "\u00e9\u4e2d";
  std::vector<std::string> bytes;
  for (char c : text) bytes.push_back(std::string(1, c));
  Chunks out = ChunksOf(bytes, 8);
  ASSERT_GT(out.size(), 5u);
  for (const auto& chunk : out) {
    EXPECT_LE(chunk.size(), 8u);
    EXPECT_TRUE(IsValidUtf8(chunk)) << chunk;
  }
  EXPECT_EQ(absl::StrJoin(out, ""), text);
}

TEST(SentenceChunkerTest, NothingIsLostOrReordered) {
  std::string text =
      "One. Two!  Three?\nFour\u2026 five \u3002six. 3.14 is pi; e.g. this. \"Quoted.\" end";
  for (size_t step = 1; step <= 7; ++step) {
    std::vector<std::string> deltas;
    for (size_t i = 0; i < text.size(); i += step) deltas.push_back(text.substr(i, step));
    EXPECT_EQ(absl::StrJoin(ChunksOf(deltas, 16), ""), text) << "step " << step;
  }
}

v1::StreamEvent Text(const std::string& t) {
  v1::StreamEvent e;
  e.set_request_id("req_1");
  e.mutable_text()->set_text(t);
  return e;
}

TEST(SentenceChunkedStreamTest, OtherEventsReleaseHeldTextAndKeepOrder) {
  SentenceChunkedStream stream;
  std::vector<v1::StreamEvent> out;
  v1::StreamEvent reasoning;
  reasoning.set_request_id("req_1");
  reasoning.mutable_reasoning()->set_text("think");
  stream.Push(reasoning, &out);
  stream.Push(Text("Let me"), &out);
  stream.Push(Text(" check. The"), &out);
  v1::StreamEvent call;
  call.set_request_id("req_1");
  call.mutable_tool_call()->mutable_call()->set_name("get_weather");
  stream.Push(call, &out);
  stream.Push(Text("Done"), &out);
  v1::StreamEvent terminal;
  terminal.set_request_id("req_1");
  terminal.mutable_terminal()->set_finish_reason(v1::FINISH_TOOL_CALLS);
  stream.Push(terminal, &out);

  ASSERT_EQ(out.size(), 6u);
  EXPECT_EQ(out[0].reasoning().text(), "think");  // reasoning passes at once
  EXPECT_EQ(out[1].text().text(), "Let me check. ");
  EXPECT_EQ(out[2].text().text(), "The");  // released by the tool call, before it
  EXPECT_TRUE(out[3].has_tool_call());
  EXPECT_EQ(out[4].text().text(), "Done");  // released by the Terminal
  EXPECT_TRUE(out[5].has_terminal());
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].seq(), i);
    EXPECT_EQ(out[i].request_id(), "req_1");
  }
}

}  // namespace
}  // namespace gantry::router
