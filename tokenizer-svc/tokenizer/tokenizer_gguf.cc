// Tokenizer::FromGguf: the tokenizer.ggml.* metadata of a GGUF file, turned into the
// same pipeline a tokenizer.json builds (see tokenizer.h for the rules and why).
//
// The GGUF keeps the vocabulary, merges and token types but not the normalizer or the
// pre-tokenizer: llama.cpp names the pre-tokenizer ("tokenizer.ggml.pre") and hard-codes
// the matching regexes. We map each supported name to what the model's Hugging Face
// tokenizer.json says, since HF's output is our reference: the same Split regex, the
// same normalizer (Qwen2's NFC, which llama.cpp itself does not apply) and the same
// ignore_merges flag. An unknown name is refused, never guessed.
#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "common/status.h"
#include "tokenizer-svc/tokenizer/added_tokens.h"
#include "tokenizer-svc/tokenizer/decoder.h"
#include "tokenizer-svc/tokenizer/model_bpe.h"
#include "tokenizer-svc/tokenizer/normalizer.h"
#include "tokenizer-svc/tokenizer/post_processor.h"
#include "tokenizer-svc/tokenizer/pre_tokenizer.h"
#include "tokenizer-svc/tokenizer/tokenizer.h"
#include "worker/gguf/gguf.h"

namespace gantry::tokenizer {
namespace {

// llama.cpp's token types (tokenizer.ggml.token_type).
constexpr int64_t kUndefined = 0, kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4,
                  kUnused = 5, kByte = 6;

// The pre-tokenization of one tokenizer.ggml.pre family, as its tokenizer.json has it.
struct PreSpec {
  const char* names[4];  // the tokenizer.ggml.pre values llama.cpp maps to this family
  const char* regex;     // the Split pattern (behavior Isolated), before ByteLevel
  bool nfc;              // normalizer NFC
  bool ignore_merges;
};

constexpr PreSpec kPreSpecs[] = {
    // Qwen2 / Qwen2.5 / Qwen3 (tokenizer.json: NFC; single digits).
    {{"qwen2", nullptr},
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
     "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     true, false},
    // Llama 3 (no normalizer; digits in groups of up to three; ignore_merges).
    {{"llama-bpe", "llama3", "llama-v3", nullptr},
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
     "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     false, true},
    // GPT-2 (ByteLevel's own regex).
    {{"gpt-2", nullptr},
     "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
     false, false},
};

const PreSpec* FindPreSpec(const std::string& name) {
  for (const PreSpec& spec : kPreSpecs) {
    for (const char* const* n = spec.names; *n != nullptr; ++n) {
      if (name == *n) return &spec;
    }
  }
  return nullptr;
}

absl::Status GgufError(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("GGUF tokenizer: ", what));
}

// Re-labels an error from the tokenizer.json component loaders.
absl::Status Relabel(const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("GGUF tokenizer (as tokenizer.json): ", status.message()));
}

json::Value Str(std::string s) { return json::Value::String(std::move(s)); }

json::Value Object(std::vector<json::Value::Member> members) {
  json::Value v = json::Value::EmptyObject();
  v.members() = std::move(members);
  return v;
}

// An array metadata value of strings, or an error naming the key.
absl::Status StringArray(const gguf::GgufFile& file, const std::string& key, bool required,
                         const std::vector<gguf::Value>** out) {
  const gguf::Value* v = file.Find(key);
  *out = nullptr;
  if (v == nullptr) return required ? GgufError(absl::StrCat(key, " is missing")) : absl::OkStatus();
  if (v->type != gguf::ValueType::kArray || v->element_type != gguf::ValueType::kString) {
    return GgufError(absl::StrCat(key, " must be an array of strings"));
  }
  *out = &v->array;
  return absl::OkStatus();
}

absl::optional<int32_t> OptionalId(const gguf::GgufFile& file, const std::string& key, size_t n) {
  const gguf::Value* v = file.Find(key);
  if (v == nullptr) return absl::nullopt;
  absl::optional<uint64_t> id = v->AsUint();
  if (!id.has_value() || *id >= n) return absl::nullopt;
  return static_cast<int32_t>(*id);
}

bool OptionalBool(const gguf::GgufFile& file, const std::string& key, bool fallback) {
  const gguf::Value* v = file.Find(key);
  if (v == nullptr || v->type != gguf::ValueType::kBool) return fallback;
  return v->u != 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const gguf::GgufFile& file) {
  const gguf::Value* model_value = file.Find("tokenizer.ggml.model");
  if (model_value == nullptr) return GgufError("the file carries no tokenizer (no tokenizer.ggml.model)");
  if (model_value->type != gguf::ValueType::kString) return GgufError("tokenizer.ggml.model must be a string");
  const std::string& model_name = model_value->s;
  if (model_name == "llama") {
    return absl::UnimplementedError(
        "GGUF tokenizer: SentencePiece vocabularies (tokenizer.ggml.model \"llama\") are not "
        "supported yet; use the model's tokenizer.json");
  }
  if (model_name != "gpt2") {
    return absl::UnimplementedError(absl::StrCat("GGUF tokenizer: tokenizer.ggml.model \"", model_name,
                                                 "\" is not supported (only \"gpt2\", byte-level BPE)"));
  }
  const gguf::Value* pre_value = file.Find("tokenizer.ggml.pre");
  if (pre_value == nullptr || pre_value->type != gguf::ValueType::kString) {
    return absl::UnimplementedError(
        "GGUF tokenizer: no tokenizer.ggml.pre: the pre-tokenizer cannot be known; use the model's "
        "tokenizer.json");
  }
  const PreSpec* pre = FindPreSpec(pre_value->s);
  if (pre == nullptr) {
    return absl::UnimplementedError(absl::StrCat("GGUF tokenizer: tokenizer.ggml.pre \"", pre_value->s,
                                                 "\" is not supported (qwen2, llama-bpe, gpt-2)"));
  }

  const std::vector<gguf::Value>* tokens = nullptr;
  const std::vector<gguf::Value>* merges = nullptr;
  GANTRY_RETURN_IF_ERROR(StringArray(file, "tokenizer.ggml.tokens", true, &tokens));
  GANTRY_RETURN_IF_ERROR(StringArray(file, "tokenizer.ggml.merges", false, &merges));
  if (tokens->empty() || tokens->size() > (1u << 24)) return GgufError("tokenizer.ggml.tokens: bad size");
  std::vector<int64_t> types(tokens->size(), kNormal);
  if (const gguf::Value* t = file.Find("tokenizer.ggml.token_type")) {
    if (t->type != gguf::ValueType::kArray || t->array.size() != tokens->size()) {
      return GgufError("tokenizer.ggml.token_type must be an array as long as tokenizer.ggml.tokens");
    }
    for (size_t i = 0; i < types.size(); ++i) {
      const gguf::Value& e = t->array[i];
      if (e.type == gguf::ValueType::kInt32 || e.type == gguf::ValueType::kInt8 ||
          e.type == gguf::ValueType::kInt16 || e.type == gguf::ValueType::kInt64) {
        types[i] = e.i;
      } else if (auto u = e.AsUint()) {
        types[i] = static_cast<int64_t>(*u);
      } else {
        return GgufError("tokenizer.ggml.token_type must hold integers");
      }
    }
  }

  // The BPE model: normal tokens only (HF keeps added tokens out of model.vocab).
  json::Value vocab = json::Value::EmptyObject();
  json::Value added = json::Value::EmptyArray();
  for (size_t i = 0; i < tokens->size(); ++i) {
    const std::string& text = (*tokens)[i].s;
    const int64_t type = types[i];
    if (type == kNormal || type == kUndefined) {
      vocab.members().emplace_back(text, json::Value::Int(static_cast<int64_t>(i)));
    } else if (type == kControl || type == kUserDefined) {
      added.Append(Object({{"id", json::Value::Int(static_cast<int64_t>(i))},
                           {"content", Str(text)},
                           {"single_word", json::Value::Bool(false)},
                           {"lstrip", json::Value::Bool(false)},
                           {"rstrip", json::Value::Bool(false)},
                           {"normalized", json::Value::Bool(false)},
                           {"special", json::Value::Bool(type == kControl)}}));
    } else if (type == kUnknown || type == kByte) {
      return GgufError(absl::StrCat("token ", i, " has type ", type,
                                    " (UNKNOWN/BYTE), which a byte-level BPE vocabulary does not use"));
    } else if (type != kUnused) {
      return GgufError(absl::StrCat("token ", i, " has unknown type ", type));
    }
  }
  json::Value merge_list = json::Value::EmptyArray();
  if (merges != nullptr) {
    merge_list.items().reserve(merges->size());
    for (const gguf::Value& m : *merges) merge_list.Append(Str(m.s));
  }
  json::Value model = Object({{"type", Str("BPE")}, {"ignore_merges", json::Value::Bool(pre->ignore_merges)}});
  model.members().emplace_back("vocab", std::move(vocab));
  model.members().emplace_back("merges", std::move(merge_list));

  std::unique_ptr<Tokenizer> t(new Tokenizer());
  if (pre->nfc) {
    auto normalizer = Normalizer::FromJson(Object({{"type", Str("NFC")}}));
    if (!normalizer.ok()) return Relabel(normalizer.status());
    t->normalizer_ = std::move(normalizer).value();
  }
  json::Value split = Object({{"type", Str("Split")},
                              {"pattern", Object({{"Regex", Str(pre->regex)}})},
                              {"behavior", Str("Isolated")},
                              {"invert", json::Value::Bool(false)}});
  json::Value byte_level = Object({{"type", Str("ByteLevel")},
                                   {"add_prefix_space", json::Value::Bool(false)},
                                   {"trim_offsets", json::Value::Bool(false)},
                                   {"use_regex", json::Value::Bool(false)}});
  json::Value sequence = json::Value::EmptyArray();
  sequence.Append(std::move(split));
  sequence.Append(byte_level);
  auto pre_tokenizer = PreTokenizer::FromJson(Object({{"type", Str("Sequence")}, {"pretokenizers", sequence}}));
  if (!pre_tokenizer.ok()) return Relabel(pre_tokenizer.status());
  t->pre_tokenizer_ = std::move(pre_tokenizer).value();

  auto bpe = BpeModel::FromJson(model, /*byte_level=*/true);
  if (!bpe.ok()) return Relabel(bpe.status());
  t->model_ = std::move(bpe).value();
  auto vocabulary = AddedVocabulary::FromJson(&added, t->normalizer_.get(),
                                              static_cast<int64_t>(tokens->size()) + 1);
  if (!vocabulary.ok()) return Relabel(vocabulary.status());
  t->added_ = std::make_unique<AddedVocabulary>(std::move(vocabulary).value());
  auto decoder = Decoder::FromJson(byte_level);
  if (!decoder.ok()) return Relabel(decoder.status());
  t->decoder_ = std::move(decoder).value();

  // Ids of the whole GGUF vocabulary, unused slots included: the model's n_vocab.
  t->vocab_size_ = static_cast<int32_t>(tokens->size());
  t->bos_id_ = OptionalId(file, "tokenizer.ggml.bos_token_id", tokens->size());
  t->eos_id_ = OptionalId(file, "tokenizer.ggml.eos_token_id", tokens->size());

  // add_special follows the GGUF's add_bos_token / add_eos_token (absent: false).
  json::Value single = json::Value::EmptyArray();
  json::Value specials = json::Value::EmptyObject();
  auto special = [&](const char* name, int32_t id) {
    single.Append(Object({{"SpecialToken", Object({{"id", Str(name)}, {"type_id", json::Value::Int(0)}})}}));
    json::Value ids = json::Value::EmptyArray();
    ids.Append(json::Value::Int(id));
    specials.members().emplace_back(name, Object({{"id", Str(name)}, {"ids", ids}}));
  };
  bool add_bos = OptionalBool(file, "tokenizer.ggml.add_bos_token", false) && t->bos_id_.has_value();
  bool add_eos = OptionalBool(file, "tokenizer.ggml.add_eos_token", false) && t->eos_id_.has_value();
  if (add_bos) special("bos", *t->bos_id_);
  single.Append(Object({{"Sequence", Object({{"id", Str("A")}, {"type_id", json::Value::Int(0)}})}}));
  if (add_eos) special("eos", *t->eos_id_);
  if (add_bos || add_eos) {
    auto post = PostProcessor::FromJson(Object(
        {{"type", Str("TemplateProcessing")}, {"single", single}, {"special_tokens", specials}}));
    if (!post.ok()) return Relabel(post.status());
    t->post_processor_ = std::move(post).value();
  }
  return t;
}

}  // namespace gantry::tokenizer
