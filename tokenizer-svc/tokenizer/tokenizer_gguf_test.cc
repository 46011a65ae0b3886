// The GGUF path against the tokenizer.json path and Hugging Face: for Qwen 3 and
// Llama 3, a `make-test-model` GGUF (vocabulary converted the way llama.cpp's converter
// does) loaded with Tokenizer::Load(file.gguf) gives, on every corpus case, the ids of
// the tokenizer.json tokenizer and the expected HF ids, in the "ids" and
// "ids_split_special" variants; plus texts outside the corpus (non-NFC input) and the
// refusals for bad or unsupported GGUF tokenizers.
//
// SentencePiece: for Mistral (reference "llama2") and Gemma 3, a `make-test-model` GGUF
// (tokenizer.ggml.model "llama": pieces, stand-in scores, types, add_space_prefix; no
// merges, see test_model.h) gives the expected HF ids in all three variants.
//
// Needs $GANTRY_REFERENCE_DIR/tokenizers/<name>/ (fails, does not skip, without it).
#include <dirent.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_replace.h"
#include "common/json.h"
#include "common/status.h"
#include "formats/gguf/gguf.h"
#include "formats/testmodel/test_model.h"
#include "gtest/gtest.h"
#include "tokenizer-svc/tokenizer/tokenizer.h"

namespace gantry::tokenizer {
namespace {

constexpr char kData[] = "tests/data/tokenizer";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

std::string TempDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t != nullptr && *t != '\0' ? t : "/tmp";
}

std::string ReferenceDir() {
  const char* root = std::getenv("GANTRY_REFERENCE_DIR");
  return root == nullptr ? "" : root;
}


struct Pair {
  std::unique_ptr<Tokenizer> json;  // from tokenizer.json (byte-level pairs only)
  std::unique_ptr<Tokenizer> gguf;  // from the make-test-model GGUF
  std::string gguf_path;
};

// Builds each pair once per test binary; nullptr (after a failure saying why) otherwise.
Pair* GetPair(const std::string& name) {
  static auto* cache = new std::map<std::string, Pair>();
  auto it = cache->find(name);
  if (it != cache->end()) return &it->second;
  if (ReferenceDir().empty()) {
    ADD_FAILURE() << "GANTRY_REFERENCE_DIR is not set (bazel test --test_env=GANTRY_REFERENCE_DIR=...)";
    return nullptr;
  }
  std::string dir = ReferenceDir() + "/tokenizers/" + name;
  Pair pair;
  pair.gguf_path = TempDir() + "/" + name + ".gguf";
  const bool sentencepiece = name == "llama2" || name == "gemma3";
  testmodel::TestModelOptions o;
  o.tokenizer_dir = dir;
  o.arch = name == "qwen3" ? "qwen3" : "llama";
  o.n_layer = 1;
  o.n_embd = 64;
  o.tied = sentencepiece;  // one 64-wide table for Gemma 3's 262k pieces is enough
  auto made = testmodel::MakeTestModel(o, pair.gguf_path);
  if (!made.ok()) {
    ADD_FAILURE() << "make-test-model " << name << ": " << made.status();
    return nullptr;
  }
  auto gguf = Tokenizer::Load(pair.gguf_path);
  if (!gguf.ok()) {
    ADD_FAILURE() << name << " (GGUF): " << gguf.status();
    return nullptr;
  }
  pair.gguf = std::move(gguf).value();
  if (!sentencepiece) {  // (the big SentencePiece files are held to HF's ids alone)
    auto json = Tokenizer::Load(dir);
    if (!json.ok()) {
      ADD_FAILURE() << name << " (tokenizer.json): " << json.status();
      return nullptr;
    }
    pair.json = std::move(json).value();
  }
  return &((*cache)[name] = std::move(pair));
}

std::vector<std::string> CaseNames(const std::string& tokenizer) {
  std::vector<std::string> names;
  std::string dir = std::string(kData) + "/expected/" + tokenizer;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.size() > 5 && n.substr(n.size() - 5) == ".json") names.push_back(n.substr(0, n.size() - 5));
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

enum class Variant { kIds, kSplitSpecial, kAddSpecial };

void RunCorpus(const std::string& name, Variant variant) {
  Pair* pair = GetPair(name);
  if (pair == nullptr) return;
  const char* key = variant == Variant::kIds ? "ids" : variant == Variant::kSplitSpecial ? "ids_split_special"
                                                                                         : "ids_add_special";
  std::vector<std::string> cases = CaseNames(name);
  ASSERT_FALSE(cases.empty());
  int passed = 0;
  for (const std::string& c : cases) {
    auto expected = json::Parse(ReadAll(std::string(kData) + "/expected/" + name + "/" + c + ".json"));
    ASSERT_TRUE(expected.ok()) << c;
    std::vector<int32_t> want;
    for (const json::Value& id : expected->Find(key)->items()) want.push_back(static_cast<int32_t>(*id.as_int64()));
    std::string text = ReadAll(std::string(kData) + "/corpus/" + c + ".txt");
    EncodeOptions options;
    options.split_special = variant == Variant::kSplitSpecial;
    options.add_special = variant == Variant::kAddSpecial;
    auto from_gguf = pair->gguf->Encode(text, options);
    ASSERT_TRUE(from_gguf.ok()) << c << ": " << from_gguf.status();
    EXPECT_EQ(*from_gguf, want) << name << " " << key << " " << c << ": GGUF differs from Hugging Face";
    bool same = *from_gguf == want;
    if (pair->json != nullptr) {
      auto from_json = pair->json->Encode(text, options);
      ASSERT_TRUE(from_json.ok()) << c;
      EXPECT_EQ(*from_gguf, *from_json) << name << " " << key << " " << c << ": GGUF differs from tokenizer.json";
      auto decoded = pair->gguf->Decode(*from_gguf);
      EXPECT_TRUE(decoded.ok() && *decoded == *pair->json->Decode(*from_json)) << name << " " << c << " decode";
      same = same && *from_gguf == *from_json;
    } else if (const json::Value* text_back = expected->Find("decoded"); text_back != nullptr &&
                                                                        variant == Variant::kIds) {
      auto decoded = pair->gguf->Decode(*from_gguf);
      EXPECT_TRUE(decoded.ok() && *decoded == text_back->as_string()) << name << " " << c << " decode";
    }
    if (same) ++passed;
  }
  std::printf("gguf %s %s: %d/%zu cases equal tokenizer.json and HF\n", name.c_str(), key, passed, cases.size());
}

TEST(TokenizerGguf, Qwen3Ids) { RunCorpus("qwen3", Variant::kIds); }
TEST(TokenizerGguf, Qwen3SplitSpecial) { RunCorpus("qwen3", Variant::kSplitSpecial); }
TEST(TokenizerGguf, Llama3Ids) { RunCorpus("llama3", Variant::kIds); }
TEST(TokenizerGguf, Llama3SplitSpecial) { RunCorpus("llama3", Variant::kSplitSpecial); }
TEST(TokenizerGguf, MistralSentencePieceIds) { RunCorpus("llama2", Variant::kIds); }
TEST(TokenizerGguf, MistralSentencePieceSplitSpecial) { RunCorpus("llama2", Variant::kSplitSpecial); }
TEST(TokenizerGguf, MistralSentencePieceAddSpecial) { RunCorpus("llama2", Variant::kAddSpecial); }
TEST(TokenizerGguf, Gemma3SentencePieceIds) { RunCorpus("gemma3", Variant::kIds); }
TEST(TokenizerGguf, Gemma3SentencePieceSplitSpecial) { RunCorpus("gemma3", Variant::kSplitSpecial); }
TEST(TokenizerGguf, Gemma3SentencePieceAddSpecial) { RunCorpus("gemma3", Variant::kAddSpecial); }

// Beyond the corpus: the normalizer (NFC for Qwen), digits, specials, added tokens.
TEST(TokenizerGguf, ExtraTextsAndMetadata) {
  const std::vector<std::string> texts = {
      "e\xCC\x81t\xC3\xA9 cafe\xCC\x81 \xE1\x84\x92\xE1\x85\xA1\xE1\x86\xAB",  // decomposed é, Hangul jamo
      "1234567 12 3.14159",
      "<|im_start|>user\nhi<|im_end|><|begin_of_text|><tool_call>{}</tool_call>",
      "  leading and trailing  \n\n\t",
      "I'm, you're, THEY'LL"};
  for (const char* name : {"qwen3", "llama3"}) {
    Pair* pair = GetPair(name);
    if (pair == nullptr) return;
    for (const std::string& text : texts) {
      for (bool split : {false, true}) {
        EncodeOptions options;
        options.split_special = split;
        EXPECT_EQ(*pair->gguf->Encode(text, options), *pair->json->Encode(text, options))
            << name << " split=" << split << ": " << text;
      }
    }
    EXPECT_GE(pair->gguf->vocab_size(), pair->json->vocab_size()) << name;
    EXPECT_EQ(pair->gguf->TokenId("<|im_start|>").has_value(), std::string(name) == "qwen3");
    EXPECT_EQ(pair->gguf->eos_id().has_value(), true) << name;
  }
  Pair* qwen = GetPair("qwen3");
  if (qwen == nullptr) return;
  int32_t im_start = *qwen->gguf->TokenId("<|im_start|>");
  EXPECT_TRUE(qwen->gguf->IsSpecial(im_start));
  EXPECT_FALSE(qwen->gguf->IsSpecial(*qwen->gguf->TokenId("<tool_call>")));
  EXPECT_EQ(qwen->gguf->eos_id(), qwen->json->eos_id());
  // add_special follows add_bos_token: false for qwen3, true (BOS first) for llama3.
  EncodeOptions add;
  add.add_special = true;
  EXPECT_EQ(*qwen->gguf->Encode("hi", add), *qwen->gguf->Encode("hi"));
  Pair* llama = GetPair("llama3");
  if (llama == nullptr) return;
  auto with_bos = *llama->gguf->Encode("hi", add);
  ASSERT_FALSE(with_bos.empty());
  EXPECT_EQ(with_bos[0], *llama->gguf->bos_id());
  EXPECT_EQ(*llama->gguf->TokenText(with_bos[0]), "<|begin_of_text|>");
}

// A hand-made SentencePiece vocabulary: the best-scored concatenation merges first, a
// space prefix is added, unknown characters fall back to bytes, decoding undoes both.
TEST(TokenizerGguf, SmallSentencePieceVocabulary) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b", "c",
                                     "\xE2\x96\x81" "a", "ab", "bc", "\xE2\x96\x81" "ab", "<0xC3>", "<0xA9>"};
  // "bc" (-1) beats "▁a" (-2) beats "ab" (-3): "▁abc" -> ▁a + bc, not ▁ab + c.
  std::vector<float> scores = {0, 0, 0, -10, -10, -10, -10, -2, -3, -1, -4, 0, 0};
  std::vector<int32_t> types = {2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 6, 6};
  gguf::GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddString("tokenizer.ggml.model", "llama");
  w.AddStringArray("tokenizer.ggml.tokens", tokens);
  w.AddFloat32Array("tokenizer.ggml.scores", scores);
  w.AddInt32Array("tokenizer.ggml.token_type", types);
  w.AddUint32("tokenizer.ggml.bos_token_id", 1);
  w.AddUint32("tokenizer.ggml.eos_token_id", 2);
  std::string path = TempDir() + "/small_spm.gguf";
  ASSERT_TRUE(w.WriteFile(path).ok());
  auto t = Tokenizer::Load(path);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*(*t)->Encode("abc"), (std::vector<int32_t>{7, 9}));
  EXPECT_EQ(*(*t)->Encode("ab a"), (std::vector<int32_t>{10, 7}));
  EXPECT_EQ(*(*t)->Encode("\xC3\xA9"), (std::vector<int32_t>{3, 11, 12}));  // é: bytes
  EncodeOptions add;
  add.add_special = true;  // absent add_bos_token: BOS, as llama.cpp defaults for SentencePiece
  EXPECT_EQ(*(*t)->Encode("abc", add), (std::vector<int32_t>{1, 7, 9}));
  EXPECT_EQ(*(*t)->Decode({1, 7, 9, 3, 11, 12}, /*skip_special=*/true), "abc \xC3\xA9");
  EXPECT_EQ(*(*t)->Encode("<s>x"), (std::vector<int32_t>{1, 3, 0}));  // x: unknown, no byte token
  EncodeOptions split;
  split.split_special = true;
  EXPECT_NE(*(*t)->Encode("<s>", split), (std::vector<int32_t>{1}));
}

gguf::GgufWriter BaseWriter() {
  gguf::GgufWriter w;
  w.AddString("general.architecture", "qwen3");
  return w;
}

absl::Status LoadWritten(const gguf::GgufWriter& w) {
  std::string path = TempDir() + "/bad_tokenizer.gguf";
  EXPECT_TRUE(w.WriteFile(path).ok());
  return Tokenizer::Load(path).status();
}

// Loading `w`'s file fails with `code` and a message naming `fragment`.
void ExpectRefused(const gguf::GgufWriter& w, absl::StatusCode code, const std::string& fragment) {
  absl::Status s = LoadWritten(w);
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_NE(s.message().find(fragment), std::string::npos) << s;
}

// A SentencePiece vocabulary "a", "b", "ab" with the given scores and types.
gguf::GgufWriter SentencePieceWriter(const std::vector<float>& scores, const std::vector<int32_t>& types) {
  gguf::GgufWriter w = BaseWriter();
  w.AddString("tokenizer.ggml.model", "llama");
  w.AddStringArray("tokenizer.ggml.tokens", {"a", "b", "ab"});
  if (!scores.empty()) w.AddFloat32Array("tokenizer.ggml.scores", scores);
  if (!types.empty()) w.AddInt32Array("tokenizer.ggml.token_type", types);
  return w;
}

TEST(TokenizerGguf, Refusals) {
  {
    gguf::GgufWriter w = BaseWriter();
    absl::Status s = LoadWritten(w);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("tokenizer.ggml.model"), std::string::npos) << s;
  }
  {
    gguf::GgufWriter w = BaseWriter();
    w.AddString("tokenizer.ggml.model", "bert");
    ExpectRefused(w, absl::StatusCode::kUnimplemented, "\"bert\"");
  }
  ExpectRefused(SentencePieceWriter({}, {}), absl::StatusCode::kInvalidArgument, "tokenizer.ggml.scores");
  ExpectRefused(SentencePieceWriter({0, 0}, {}), absl::StatusCode::kInvalidArgument, "as long as");
  ExpectRefused(SentencePieceWriter({0, 0, 0}, {1, 1, 9}), absl::StatusCode::kInvalidArgument, "unknown type 9");
  EXPECT_TRUE(LoadWritten(SentencePieceWriter({0, 0, std::nanf("")}, {1, 1, 1})).ok());  // NaN: ranked last
  {
    gguf::GgufWriter w = BaseWriter();
    w.AddString("tokenizer.ggml.model", "gpt2");
    w.AddString("tokenizer.ggml.pre", "deepseek-coder");
    absl::Status s = LoadWritten(w);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
    EXPECT_NE(s.message().find("deepseek-coder"), std::string::npos) << s;
  }
  {
    gguf::GgufWriter w = BaseWriter();
    w.AddString("tokenizer.ggml.model", "gpt2");
    w.AddString("tokenizer.ggml.pre", "qwen2");
    w.AddStringArray("tokenizer.ggml.tokens", {"a", "b", "ab"});
    w.AddInt32Array("tokenizer.ggml.token_type", {1, 1});
    absl::Status s = LoadWritten(w);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("token_type"), std::string::npos) << s;
  }
  {
    gguf::GgufWriter w = BaseWriter();
    w.AddString("tokenizer.ggml.model", "gpt2");
    w.AddString("tokenizer.ggml.pre", "qwen2");
    w.AddStringArray("tokenizer.ggml.tokens", {"a", "b", "ab"});
    w.AddStringArray("tokenizer.ggml.merges", {"a c"});
    absl::Status s = LoadWritten(w);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  }
  {
    gguf::GgufWriter w = BaseWriter();
    w.AddString("tokenizer.ggml.model", "gpt2");
    w.AddString("tokenizer.ggml.pre", "qwen2");
    w.AddStringArray("tokenizer.ggml.tokens", {"a", "b", "ab"});
    w.AddStringArray("tokenizer.ggml.merges", {"a b"});
    EXPECT_TRUE(LoadWritten(w).ok());
  }
  std::string junk = TempDir() + "/junk.gguf";
  std::ofstream(junk, std::ios::binary) << std::string("GGUF\x03\0\0\0truncated", 17);
  auto bad = Tokenizer::Load(junk);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(ReasonOf(bad.status()), "invalid_gguf") << bad.status();
}

}  // namespace
}  // namespace gantry::tokenizer
