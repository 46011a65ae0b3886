#include "worker/constrain/token_mask.h"

#include <random>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/json_schema.h"
#include "gtest/gtest.h"

namespace gantry::constrain {
namespace {

std::shared_ptr<const JsonGrammar> G(const std::string& schema) {
  return *JsonGrammar::Compile(*json_schema::Schema::CompileText(schema), Fidelity::kExact);
}

// A vocabulary with tokens that span structure, strings and partial UTF-8 characters.
std::vector<std::string> SmallVocabulary() {
  std::vector<std::string> v = {"<eos>", "{", "}", "\"", "\":", "\",", "{\"", "\"}", " ", "\n  ", ":", ",",
                                "a", "ab", "b", "path", "n", "1", "12", "0", ".", "-", "true", "tr", "ue",
                                "\xc3", "\xa9", "\xc3\xa9", "\\", "n\"", "}}", "[", "]", "\"a\"", "x\"}"};
  for (int b = 0x20; b < 0x7f; ++b) v.push_back(std::string(1, static_cast<char>(b)));
  return v;
}

// The mask by brute force: every token's bytes fed to a copy of the matcher.
TokenBits BruteForce(const Vocabulary& vocab, const JsonMatcher& m) {
  TokenBits bits((vocab.size() + 63) / 64, 0);
  for (int32_t id = 0; id < vocab.size(); ++id) {
    if (vocab.bytes(id).empty() || vocab.special(id)) continue;
    JsonMatcher probe = m;
    if (probe.Feed(vocab.bytes(id))) bits[id / 64] |= uint64_t{1} << (id % 64);
  }
  return bits;
}

TEST(TokenMaskTest, TheTrieWalkAllowsExactlyTheTokensTheMatcherAccepts) {
  std::vector<bool> special(SmallVocabulary().size(), false);
  special[0] = true;
  auto vocab = std::make_shared<const Vocabulary>(SmallVocabulary(), special);
  for (const char* schema : {
           R"({"type":"object","properties":{"path":{"type":"string","maxLength":4},"n":{"type":"integer"}},
               "required":["path"],"additionalProperties":false})",
           R"({"type":"array","items":{"anyOf":[{"type":"boolean"},{"type":"number","minimum":-1}]}})",
       }) {
    auto g = G(schema);
    MaskCache cache;
    // Along random constrained generations, at every step.
    std::mt19937_64 rng(3);
    for (int walk = 0; walk < 40; ++walk) {
      Constraint c(vocab, g, 1, &cache, {0});
      JsonMatcher shadow(g);
      std::string text;
      for (int step = 0; step < 60; ++step) {
        const TokenBits* allowed = c.Allowed();
        ASSERT_NE(allowed, nullptr);
        TokenBits expected = BruteForce(*vocab, shadow);
        if (shadow.Complete()) expected[0] |= 1;
        ASSERT_EQ(*allowed, expected) << schema << " after " << step << " steps";
        std::vector<int32_t> ids;
        for (int32_t id = 0; id < vocab->size(); ++id) {
          if (Allows(*allowed, id)) ids.push_back(id);
        }
        ASSERT_FALSE(ids.empty()) << schema << ": " << text;
        const int32_t id = ids[rng() % ids.size()];
        ASSERT_TRUE(c.Accept(id).ok());
        if (id == 0) break;
        ASSERT_TRUE(shadow.Feed(vocab->bytes(id)));
        text += vocab->bytes(id);
      }
    }
    EXPECT_GT(cache.hits(), 0u);
  }
}

TEST(TokenMaskTest, StopTokensOnlyOnceTheValueIsWholeAndNothingAfterIt) {
  std::vector<bool> special(SmallVocabulary().size(), false);
  special[0] = true;
  auto vocab = std::make_shared<const Vocabulary>(SmallVocabulary(), special);
  MaskCache cache;
  Constraint c(vocab, JsonGrammar::AnyObject(), 2, &cache, {0});
  EXPECT_FALSE(Allows(*c.Allowed(), 0));
  EXPECT_TRUE(Allows(*c.Allowed(), 1));   // {
  EXPECT_FALSE(Allows(*c.Allowed(), 2));  // }
  ASSERT_TRUE(c.Accept(1).ok());
  ASSERT_TRUE(c.Accept(2).ok());
  EXPECT_TRUE(c.complete());
  const TokenBits& after = *c.Allowed();
  for (int32_t id = 1; id < vocab->size(); ++id) EXPECT_FALSE(Allows(after, id)) << vocab->bytes(id);
  EXPECT_TRUE(Allows(after, 0));
  // A token outside the mask is refused, not fed.
  Constraint d(vocab, JsonGrammar::AnyObject(), 2, &cache, {0});
  EXPECT_EQ(d.Accept(2).message(), "token 2 does not fit the constrained output");
  EXPECT_FALSE(d.Accept(0).ok());  // the stop token before the value is whole
}

TEST(TokenMaskTest, ATriggerStartsTheConstraintWithTheBytesAfterIt) {
  std::vector<std::string> bytes = SmallVocabulary();
  bytes.push_back("<tool_call>");
  bytes.push_back("</think>\n\n{");
  auto vocab = std::make_shared<const Vocabulary>(bytes);
  MaskCache cache;
  Constraint c(vocab, JsonGrammar::AnyObject(), 3, &cache, {0}, "</think>");
  EXPECT_EQ(c.Allowed(), nullptr);
  ASSERT_TRUE(c.Accept(12).ok());  // "a": free text
  EXPECT_FALSE(c.active());
  ASSERT_TRUE(c.Accept(static_cast<int32_t>(bytes.size() - 1)).ok());
  ASSERT_TRUE(c.active());
  EXPECT_FALSE(Allows(*c.Allowed(), 1));  // inside the object already
  EXPECT_TRUE(Allows(*c.Allowed(), 2));
  // A trigger split across tokens.
  bytes.push_back("</th");
  bytes.push_back("ink>");
  vocab = std::make_shared<const Vocabulary>(bytes);
  Constraint split(vocab, JsonGrammar::AnyObject(), 3, &cache, {0}, "</think>");
  ASSERT_TRUE(split.Accept(static_cast<int32_t>(bytes.size() - 2)).ok());
  EXPECT_FALSE(split.active());
  ASSERT_TRUE(split.Accept(static_cast<int32_t>(bytes.size() - 1)).ok());
  EXPECT_TRUE(split.active());
}

// Lazy: free text, then "<tool_call>" starts the grammar, "</tool_call>" ends it, and
// the text is free again until the next call.
TEST(TokenMaskTest, AToolCallIsConstrainedFromItsTriggerToItsEnd) {
  std::vector<std::string> bytes = SmallVocabulary();
  const int32_t open = static_cast<int32_t>(bytes.size());
  bytes.push_back("<tool_call>");
  const int32_t close = open + 1;
  bytes.push_back("</tool_call>");
  const int32_t call = open + 2;
  bytes.push_back("{\"name\": \"f\", \"arguments\": {}}");
  std::vector<bool> special(bytes.size(), false);
  special[0] = true;
  auto vocab = std::make_shared<const Vocabulary>(bytes, special);
  auto g = *JsonGrammar::ForToolCall({{"f", ""}}, Fidelity::kRelaxed);
  MaskCache cache;
  Constraint c(vocab, g, 4, &cache, {0}, "<tool_call>", "</tool_call>");
  for (int round = 0; round < 2; ++round) {
    EXPECT_EQ(c.Allowed(), nullptr);  // free text, the stop token included
    ASSERT_TRUE(c.Accept(12).ok());   // "a"
    ASSERT_TRUE(c.Accept(open).ok());
    ASSERT_TRUE(c.active());
    EXPECT_FALSE(Allows(*c.Allowed(), 0));      // no stop inside a call
    EXPECT_FALSE(Allows(*c.Allowed(), close));  // nor its end before the value
    ASSERT_TRUE(c.Accept(call).ok());
    EXPECT_TRUE(Allows(*c.Allowed(), close));
    EXPECT_FALSE(Allows(*c.Allowed(), 0));
    ASSERT_TRUE(c.Accept(close).ok());
    EXPECT_FALSE(c.active());
    EXPECT_EQ(c.completed(), round + 1);
  }
}

TEST(TokenMaskTest, TheCacheStaysWithinItsBytes) {
  auto vocab = std::make_shared<const Vocabulary>(SmallVocabulary());
  auto g = G(R"({"type":"string","maxLength":100})");
  const size_t mask_bytes = (vocab->size() + 63) / 64 * 8;
  MaskCache cache(3 * (mask_bytes + 40));  // three masks and their keys
  JsonMatcher m(g);
  ASSERT_TRUE(m.Feed("\""));
  for (int i = 0; i < 20; ++i) {
    cache.Get(*vocab, 9, m);  // a new state each time: one code point more
    ASSERT_TRUE(m.Feed("a"));
    EXPECT_LE(cache.bytes(), 3 * (mask_bytes + 40));
  }
  EXPECT_EQ(cache.misses(), 20u);
  EXPECT_GT(cache.bytes(), 0u);
}

}  // namespace
}  // namespace gantry::constrain
