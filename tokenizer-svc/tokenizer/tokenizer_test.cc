// Unit tests on the tiny tokenizers: pipeline pieces, added-token flags, special tokens
// as text, errors for bad input, GGUF rejection, the streaming decoder.
#include "tokenizer-svc/tokenizer/tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tokenizer-svc/tokenizer/decoder.h"
#include "tokenizer-svc/tokenizer/regex.h"
#include "tokenizer-svc/tokenizer/tiny_tokenizers.h"

namespace gantry::tokenizer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::unique_ptr<Tokenizer> ByteLevel() {
  auto t = Tokenizer::FromJson(TinyByteLevelTokenizerJson(), "");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(t).value() : nullptr;
}

std::unique_ptr<Tokenizer> SentencePiece() {
  auto t = Tokenizer::FromJson(TinySentencePieceTokenizerJson(),
                               R"({"bos_token": "<s>", "eos_token": {"content": "</s>"}})");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(t).value() : nullptr;
}

// Ids of the tiny byte-level tokenizer: bytes are their own ids; merges follow.
constexpr int32_t kSpaceT = 256, kHe = 257, kSpaceThe = 258, kIn = 259, kSpaceIn = 260;
constexpr int32_t kImStart = 261, kToolCall = 262, kLstrip = 263, kRstrip = 264, kWord = 265;

TEST(ByteLevelTokenizer, MergesByRank) {
  auto t = ByteLevel();
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(*t->Encode("the in"), ElementsAre('t', kHe, kSpaceIn));
  EXPECT_THAT(*t->Encode(" the"), ElementsAre(kSpaceThe));
  EXPECT_EQ(t->vocab_size(), 266);
  EXPECT_EQ(*t->TokenText(kSpaceThe), "\xC4\xA0the");
  EXPECT_EQ(*t->TokenId("<tool_call>"), kToolCall);
}

TEST(ByteLevelTokenizer, SpecialTokensParsedOrText) {
  auto t = ByteLevel();
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(*t->Encode("<|im_start|>x"), ElementsAre(kImStart, 'x'));
  EncodeOptions as_text;
  as_text.split_special = true;
  auto ids = *t->Encode("<|im_start|>x", as_text);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), kImStart), 0);
  EXPECT_EQ(*t->Decode(ids), "<|im_start|>x");
  // Non-special added tokens are matched in both modes, as in HF.
  EXPECT_THAT(*t->Encode("<tool_call>", as_text), ElementsAre(kToolCall));
  EXPECT_TRUE(t->IsSpecial(kImStart));
  EXPECT_FALSE(t->IsSpecial(kToolCall));
}

TEST(ByteLevelTokenizer, AddedTokenFlags) {
  auto t = ByteLevel();
  ASSERT_NE(t, nullptr);
  // lstrip absorbs the whitespace on the left, rstrip on the right.
  EXPECT_THAT(*t->Encode("a  <|l|>b"), ElementsAre('a', kLstrip, 'b'));
  EXPECT_THAT(*t->Encode("a<|r|> \nb"), ElementsAre('a', kRstrip, 'b'));
  // single_word: only when no word character touches the match.
  EXPECT_THAT(*t->Encode("a <w> b"), ElementsAre('a', ' ', kWord, ' ', 'b'));
  auto glued = *t->Encode("a<w>b");
  EXPECT_EQ(std::count(glued.begin(), glued.end(), kWord), 0);
}

TEST(ByteLevelTokenizer, NfcAndRoundTrip) {
  auto t = ByteLevel();
  ASSERT_NE(t, nullptr);
  // "e" + combining acute composes to U+00E9 before BPE.
  auto ids = *t->Encode("e\xCC\x81");
  EXPECT_THAT(ids, ElementsAre(0xC3, 0xA9));
  EXPECT_EQ(*t->Decode(ids), "\xC3\xA9");
  // U+0085 is White_Space for HF; it stays with the following spaces.
  EXPECT_EQ(*t->Decode(*t->Encode("a\xC2\x85 b")), "a\xC2\x85 b");
}

TEST(ByteLevelTokenizer, Errors) {
  auto t = ByteLevel();
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->Encode("\xFF").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t->Decode({99999}).status().code(), absl::StatusCode::kInvalidArgument);
  // A lone byte token decodes to U+FFFD, never to a broken sequence.
  EXPECT_EQ(*t->Decode({0xE4}), "\xEF\xBF\xBD");
}

TEST(SentencePieceTokenizer, SpaceMarkerByteFallbackAndBos) {
  auto t = SentencePiece();
  ASSERT_NE(t, nullptr);
  const int32_t kHello = 3 + 256 + 9 + 4;  // "▁hello", the last merge
  EXPECT_THAT(*t->Encode("hello"), ElementsAre(kHello));
  EncodeOptions bos;
  bos.add_special = true;
  EXPECT_THAT(*t->Encode("hello", bos), ElementsAre(1, kHello));
  // "z" is not in the vocabulary: byte fallback <0x7A>.
  EXPECT_THAT(*t->Encode("z"), ElementsAre(3 + 256 + 8, 3 + 0x7A));
  EXPECT_EQ(*t->Decode(*t->Encode("hello z\xE2\x82\xAC")), "hello z\xE2\x82\xAC");
  EXPECT_EQ(*t->Decode({1, kHello}, /*skip_special=*/true), "hello");
  EXPECT_EQ(t->bos_id(), 1);
  EXPECT_EQ(t->eos_id(), 2);
}

TEST(StreamDecoder, HoldsIncompleteCharacters) {
  auto t = SentencePiece();
  ASSERT_NE(t, nullptr);
  auto ids = *t->Encode("hello \xE2\x82\xAC!");  // the euro sign is three byte tokens
  StreamDecoder stream(t.get(), false);
  std::string all;
  for (int32_t id : ids) {
    auto piece = stream.Push(id);
    ASSERT_TRUE(piece.ok());
    EXPECT_FALSE(piece->find("\xEF\xBF\xBD") != std::string::npos) << "broken sequence emitted";
    all += *piece;
  }
  all += stream.Finish();
  EXPECT_EQ(all, *t->Decode(ids));
  // An unfinished character is repaired at the end.
  StreamDecoder cut(t.get(), false);
  EXPECT_EQ(*cut.Push(3 + 0xE2), "");
  EXPECT_EQ(cut.Finish(), "\xEF\xBF\xBD");
  EXPECT_FALSE(cut.Push(999999).ok());
}

TEST(Utf8, CompletePrefixAndLossy) {
  EXPECT_EQ(CompleteUtf8PrefixLength("ab\xE2\x82"), 2u);
  EXPECT_EQ(CompleteUtf8PrefixLength("ab\xE2\x82\xAC"), 5u);
  EXPECT_EQ(CompleteUtf8PrefixLength("ab\xFF"), 3u);  // can never complete: not held
  std::string out;
  AppendUtf8Lossy("a\xE2\x82z\xC0", &out);
  EXPECT_EQ(out, "a\xEF\xBF\xBDz\xEF\xBF\xBD");
}

TEST(Regex, WhitespaceRewrite) {
  EXPECT_EQ(RewriteWhitespaceEscapes("[^\\s\\p{L}]|\\S|\\\\s"),
            "[^\\p{White_Space}\\p{L}]|\\P{White_Space}|\\\\s");
}

TEST(Load, RejectsBadInputWithStatus) {
  EXPECT_FALSE(Tokenizer::FromJson("{", "").ok());
  EXPECT_FALSE(Tokenizer::FromJson("[]", "").ok());
  EXPECT_FALSE(Tokenizer::FromJson(R"({"model": {"type": "Unigram", "vocab": []}})", "").ok());
  EXPECT_FALSE(Tokenizer::FromJson(R"({"model": {"vocab": {"a": 0}, "merges": ["a b"]}})", "").ok());
  EXPECT_FALSE(Tokenizer::FromJson(R"({"model": {"vocab": {"a": 99999999}}})", "").ok());
  auto bad_regex = Tokenizer::FromJson(
      R"({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "("}}, "model": {"vocab": {}}})", "");
  EXPECT_EQ(bad_regex.status().code(), absl::StatusCode::kInvalidArgument);
}

// GGUF files are loaded (tokenizer_gguf_test.cc); a truncated one is a clean error.
TEST(Load, RejectsBadGgufAndMissingFiles) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string dir = tmp != nullptr ? tmp : "/tmp";
  std::string gguf = dir + "/model.gguf";
  std::ofstream(gguf, std::ios::binary) << "GGUF\x03\x00\x00\x00";
  auto loaded = Tokenizer::Load(gguf);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(loaded.status().message()), HasSubstr("GGUF"));
  EXPECT_EQ(Tokenizer::Load(dir).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Tokenizer::Load(dir + "/nope").status().code(), absl::StatusCode::kNotFound);
}


// The section cache is exact: every encode, first (a miss) or repeated (a hit), equals
// an encode that bypasses the cache; sections that differ in one byte, in where the
// text starts, or in whether special tokens count never share an entry.
TEST(SectionCache, HitsEqualFreshEncodes) {
  auto t = ByteLevel();
  ASSERT_NE(t, nullptr);
  const std::string body = "the thin tin in the inn, 's 'll 123 \u00e9 ";
  std::string long_text;
  while (long_text.size() < Tokenizer::kMinCachedSectionBytes + 40) long_text += body;
  const std::vector<std::string> texts = {
      long_text,
      long_text + "x",                                          // one byte more
      "x" + long_text,                                          // one byte before
      long_text + "<|im_start|>" + long_text,                   // two long sections
      long_text + "<tool_call>" + long_text + "<|im_start|>",   // a non-special token too
      "<|im_start|>" + long_text,                               // not the first section
      std::string(Tokenizer::kMinCachedSectionBytes - 1, 'a'),  // too short to keep
      std::string(Tokenizer::kMinCachedSectionBytes, 'a'),
  };
  for (int round = 0; round < 2; ++round) {
    for (const std::string& text : texts) {
      for (bool split : {false, true}) {
        EncodeOptions fresh;
        fresh.split_special = split;
        fresh.use_section_cache = false;
        auto want = t->Encode(text, fresh);
        ASSERT_TRUE(want.ok()) << want.status();
        EncodeOptions cached;
        cached.split_special = split;
        auto got = t->Encode(text, cached);
        ASSERT_TRUE(got.ok()) << got.status();
        EXPECT_EQ(*got, *want) << "round " << round << " split " << split << ": " << text;
      }
    }
  }
  // The second round found every long section the first one kept.
  EXPECT_GT(t->section_cache_hits(), 0u);
  // Special-token text as text (a literal range over it) against the same bytes with
  // the token recognised: different ids, each equal to its fresh encode.
  const std::string text = long_text + "<|im_start|>" + long_text;
  EncodeOptions literal;
  literal.literal_ranges = {{long_text.size(), long_text.size() + 12}};
  for (int round = 0; round < 2; ++round) {
    EncodeOptions fresh = literal;
    fresh.use_section_cache = false;
    auto want = t->Encode(text, fresh);
    auto got = t->Encode(text, literal);
    auto as_token = t->Encode(text);
    ASSERT_TRUE(want.ok() && got.ok() && as_token.ok());
    EXPECT_EQ(*got, *want);
    EXPECT_NE(*got, *as_token);
    EXPECT_EQ(std::count(as_token->begin(), as_token->end(), kImStart), 1);
    EXPECT_EQ(std::count(got->begin(), got->end(), kImStart), 0);
  }
}

}  // namespace
}  // namespace gantry::tokenizer
