// Vocabulary::FromTokenizer on the real tokenizers of the reference folder
// ($GANTRY_REFERENCE_DIR/tokenizers/qwen3: byte-level BPE; llama2: SentencePiece with
// byte fallback): what each token adds to a text, and masks that equal brute force
// over the whole vocabulary.
#include <cstdlib>
#include <memory>
#include <string>

#include "common/json_schema.h"
#include "gtest/gtest.h"
#include "tokenizer-svc/tokenizer/tokenizer.h"
#include "worker/constrain/json_grammar.h"
#include "worker/constrain/token_mask.h"

namespace gantry::constrain {
namespace {

std::unique_ptr<tokenizer::Tokenizer> Load(const std::string& name) {
  const char* root = std::getenv("GANTRY_REFERENCE_DIR");
  if (root == nullptr || *root == 0) {
    ADD_FAILURE() << "set GANTRY_REFERENCE_DIR (tests/run does)";
    return nullptr;
  }
  auto t = tokenizer::Tokenizer::Load(std::string(root) + "/tokenizers/" + name);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

int32_t Id(const tokenizer::Tokenizer& t, const std::string& text) {
  auto id = t.TokenId(text);
  EXPECT_TRUE(id.has_value()) << text;
  return id.value_or(0);
}

// At states a generation passes through, the mask is exactly the tokens whose bytes a
// copy of the matcher takes.
void ExpectMasksEqualBruteForce(const Vocabulary& vocab) {
  auto g = *JsonGrammar::Compile(
      *json_schema::Schema::CompileText(
          R"({"type":"object","properties":{"command":{"type":"string","maxLength":12},
              "timeout":{"type":"integer","minimum":1,"maximum":600}},"required":["command"]})"),
      Fidelity::kExact);
  for (const char* prefix : {"", "{\"co", "{\"command\": \"ls -", "{\"command\":\"abcdefghij",
                             "{\"timeout\": 6", "{\"other\":\"x\\u00", "{\"free key"}) {
    JsonMatcher m(g);
    ASSERT_TRUE(m.Feed(prefix)) << prefix;
    TokenBits walked((vocab.size() + 63) / 64, 0), brute = walked;
    vocab.AllowedBy(m, &walked);
    int allowed = 0;
    for (int32_t id = 0; id < vocab.size(); ++id) {
      if (vocab.bytes(id).empty() || vocab.special(id)) continue;
      JsonMatcher probe = m;
      if (probe.Feed(vocab.bytes(id))) brute[id / 64] |= uint64_t{1} << (id % 64), ++allowed;
    }
    EXPECT_EQ(walked, brute) << prefix;
    EXPECT_GT(allowed, 0) << prefix;
  }
}

TEST(VocabularyTest, ByteLevelTokensAreTheirBytes) {
  auto t = Load("qwen3");
  ASSERT_NE(t, nullptr);
  auto vocab = Vocabulary::FromTokenizer(*t);
  EXPECT_EQ(vocab->bytes(Id(*t, "Ġ{")), " {");
  EXPECT_EQ(vocab->bytes(Id(*t, "\":")), "\":");
  EXPECT_EQ(vocab->bytes(Id(*t, "Ċ")), "\n");
  EXPECT_EQ(vocab->bytes(Id(*t, "Ã")), "\xc3");  // half of a UTF-8 character
  EXPECT_FALSE(vocab->plain(Id(*t, "Ã")));
  EXPECT_TRUE(vocab->special(Id(*t, "<|im_end|>")));
  ExpectMasksEqualBruteForce(*vocab);
}

TEST(VocabularyTest, SentencePiecePiecesKeepTheirSpace) {
  auto t = Load("llama2");
  ASSERT_NE(t, nullptr);
  auto vocab = Vocabulary::FromTokenizer(*t);
  EXPECT_EQ(vocab->bytes(Id(*t, "\xe2\x96\x81the")), " the");
  EXPECT_EQ(vocab->bytes(Id(*t, "<0x0A>")), "\n");
  EXPECT_EQ(vocab->bytes(Id(*t, "{")), "{");
  EXPECT_TRUE(vocab->special(Id(*t, "</s>")));
  ExpectMasksEqualBruteForce(*vocab);
}

}  // namespace
}  // namespace gantry::constrain
