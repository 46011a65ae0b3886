// Tokenizer::FromGguf: the tokenizer.ggml.* metadata of a GGUF file, turned into the
// same pipeline a tokenizer.json builds (see tokenizer.h for the rules and why).
//
// Byte-level BPE ("gpt2"): the GGUF keeps the vocabulary, merges and token types but not
// the normalizer or the pre-tokenizer: llama.cpp names the pre-tokenizer
// ("tokenizer.ggml.pre") and hard-codes the matching regexes. We map each supported
// name to what the model's Hugging Face tokenizer.json says, since HF's output is our
// reference: the same Split regex, the same normalizer (Qwen2's NFC, which llama.cpp
// itself does not apply) and the same ignore_merges flag. An unknown name is refused,
// never guessed.
//
// SentencePiece BPE ("llama": Llama 2, Mistral, Gemma): the GGUF keeps pieces, scores
// and types but no merges; the merges are rebuilt from the scores (spm_merges.h) and the
// rest is what HF's converter writes for such a model: spaces become U+2581, a U+2581 is
// prepended unless tokenizer.ggml.add_space_prefix is false (Gemma), byte fallback,
// and the decoder that undoes both.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/json.h"
#include "common/status.h"
#include "formats/gguf/gguf.h"
#include "tokenizer-svc/tokenizer/added_tokens.h"
#include "tokenizer-svc/tokenizer/decoder.h"
#include "tokenizer-svc/tokenizer/model_bpe.h"
#include "tokenizer-svc/tokenizer/normalizer.h"
#include "tokenizer-svc/tokenizer/post_processor.h"
#include "tokenizer-svc/tokenizer/pre_tokenizer.h"
#include "tokenizer-svc/tokenizer/spm_merges.h"
#include "tokenizer-svc/tokenizer/tokenizer.h"

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

// The token types, as long as the tokens (absent: all NORMAL).
absl::StatusOr<std::vector<int64_t>> TokenTypes(const gguf::GgufFile& file, size_t n) {
  std::vector<int64_t> types(n, kNormal);
  const gguf::Value* t = file.Find("tokenizer.ggml.token_type");
  if (t == nullptr) return types;
  if (t->type != gguf::ValueType::kArray || t->array.size() != n) {
    return GgufError("tokenizer.ggml.token_type must be an array as long as tokenizer.ggml.tokens");
  }
  for (size_t i = 0; i < n; ++i) {
    const gguf::Value& e = t->array[i];
    if (e.type == gguf::ValueType::kInt32 || e.type == gguf::ValueType::kInt8 ||
        e.type == gguf::ValueType::kInt16 || e.type == gguf::ValueType::kInt64) {
      types[i] = e.i;
    } else if (auto u = e.AsUint()) {
      types[i] = static_cast<int64_t>(*u);
    } else {
      return GgufError("tokenizer.ggml.token_type must hold integers");
    }
    if (types[i] < kUndefined || types[i] > kByte) {
      return GgufError(absl::StrCat("token ", i, " has unknown type ", types[i]));
    }
  }
  return types;
}

json::Value AddedTokenJson(size_t id, const std::string& text, bool special) {
  return Object({{"id", json::Value::Int(static_cast<int64_t>(id))},
                 {"content", Str(text)},
                 {"single_word", json::Value::Bool(false)},
                 {"lstrip", json::Value::Bool(false)},
                 {"rstrip", json::Value::Bool(false)},
                 {"normalized", json::Value::Bool(false)},
                 {"special", json::Value::Bool(special)}});
}

// What each family contributes: the pipeline components as tokenizer.json has them.
struct Pipeline {
  json::Value normalizer;     // null: none
  json::Value pre_tokenizer;  // null: none
  json::Value model;
  json::Value added = json::Value::EmptyArray();
  json::Value decoder;
  bool byte_level = false;
  bool default_add_bos = false;  // llama.cpp's default when add_bos_token is absent
};

// The pre-tokenizer family a byte-level GGUF names; UNIMPLEMENTED when it names none we know.
absl::StatusOr<const PreSpec*> ByteLevelPre(const gguf::GgufFile& file) {
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
  return pre;
}

absl::StatusOr<Pipeline> ByteLevelPipeline(const gguf::GgufFile& file, const PreSpec* pre,
                                           const std::vector<gguf::Value>& tokens,
                                           const std::vector<int64_t>& types) {
  const std::vector<gguf::Value>* merges = nullptr;
  GANTRY_RETURN_IF_ERROR(StringArray(file, "tokenizer.ggml.merges", false, &merges));

  Pipeline p;
  p.byte_level = true;
  // The BPE model: normal tokens only (HF keeps added tokens out of model.vocab).
  json::Value vocab = json::Value::EmptyObject();
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& text = tokens[i].s;
    const int64_t type = types[i];
    if (type == kNormal || type == kUndefined) {
      vocab.members().emplace_back(text, json::Value::Int(static_cast<int64_t>(i)));
    } else if (type == kControl || type == kUserDefined) {
      p.added.Append(AddedTokenJson(i, text, type == kControl));
    } else if (type == kUnknown || type == kByte) {
      return GgufError(absl::StrCat("token ", i, " has type ", type,
                                    " (UNKNOWN/BYTE), which a byte-level BPE vocabulary does not use"));
    }
  }
  json::Value merge_list = json::Value::EmptyArray();
  if (merges != nullptr) {
    merge_list.items().reserve(merges->size());
    for (const gguf::Value& m : *merges) merge_list.Append(Str(m.s));
  }
  p.model = Object({{"type", Str("BPE")}, {"ignore_merges", json::Value::Bool(pre->ignore_merges)}});
  p.model.members().emplace_back("vocab", std::move(vocab));
  p.model.members().emplace_back("merges", std::move(merge_list));

  if (pre->nfc) p.normalizer = Object({{"type", Str("NFC")}});
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
  p.pre_tokenizer = Object({{"type", Str("Sequence")}, {"pretokenizers", sequence}});
  p.decoder = std::move(byte_level);
  return p;
}

constexpr char kSpaceMarker[] = "\xE2\x96\x81";  // U+2581, SentencePiece's space

absl::StatusOr<Pipeline> SentencePiecePipeline(const gguf::GgufFile& file,
                                               const std::vector<gguf::Value>& tokens,
                                               const std::vector<int64_t>& types) {
  const gguf::Value* scores = file.Find("tokenizer.ggml.scores");
  if (scores == nullptr) return GgufError("tokenizer.ggml.scores is missing (a SentencePiece vocabulary needs it)");
  if (scores->type != gguf::ValueType::kArray || scores->array.size() != tokens.size()) {
    return GgufError("tokenizer.ggml.scores must be an array as long as tokenizer.ggml.tokens");
  }
  Pipeline p;
  p.default_add_bos = true;
  const bool add_space_prefix = OptionalBool(file, "tokenizer.ggml.add_space_prefix", true);
  absl::optional<int32_t> unk = OptionalId(file, "tokenizer.ggml.unknown_token_id", tokens.size());

  // Every piece is in the model's vocabulary (as in HF's files), control and
  // user-defined ones also added tokens. llama.cpp's converter writes the spaces of
  // user-defined pieces as ' ' ("pre-normalized"); the piece itself has U+2581.
  // Control and user-defined pieces rank above every scored piece: SentencePiece gives
  // them score 0 (the converter's -1000 is a placeholder), normal pieces negative scores.
  std::vector<SpmPiece> pieces(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int64_t type = types[i];
    if (type == kUnused) continue;
    std::string text = tokens[i].s;
    if (type == kUserDefined) text = absl::StrReplaceAll(text, {{" ", kSpaceMarker}});
    if (text.empty()) continue;
    absl::optional<double> score = scores->array[i].AsFloat();
    if (!score.has_value()) return GgufError("tokenizer.ggml.scores must hold numbers");
    pieces[i].priority = type == kControl || type == kUserDefined ? std::numeric_limits<double>::infinity() : *score;
    if (type == kControl || type == kUserDefined) p.added.Append(AddedTokenJson(i, text, type == kControl));
    if (type == kUnknown && !unk.has_value()) unk = static_cast<int32_t>(i);
    pieces[i].text = std::move(text);
  }
  GANTRY_ASSIGN_OR_RETURN(auto merges, SpmMerges(pieces));

  json::Value vocab = json::Value::EmptyObject();
  vocab.members().reserve(pieces.size());
  absl::flat_hash_set<absl::string_view> seen;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (pieces[i].text.empty() || !seen.insert(pieces[i].text).second) continue;
    vocab.members().emplace_back(pieces[i].text, json::Value::Int(static_cast<int64_t>(i)));
  }
  json::Value merge_list = json::Value::EmptyArray();
  merge_list.items().reserve(merges.size());
  for (const auto& [left, right] : merges) {
    json::Value pair = json::Value::EmptyArray();
    pair.Append(Str(pieces[left].text));
    pair.Append(Str(pieces[right].text));
    merge_list.Append(std::move(pair));
  }
  p.model = Object({{"type", Str("BPE")},
                    {"fuse_unk", json::Value::Bool(true)},
                    {"byte_fallback", json::Value::Bool(true)}});
  if (unk.has_value() && !pieces[*unk].text.empty()) p.model.Set("unk_token", Str(pieces[*unk].text));
  p.model.members().emplace_back("vocab", std::move(vocab));
  p.model.members().emplace_back("merges", std::move(merge_list));

  json::Value replace = Object({{"type", Str("Replace")},
                                {"pattern", Object({{"String", Str(" ")}})},
                                {"content", Str(kSpaceMarker)}});
  if (add_space_prefix) {
    json::Value steps = json::Value::EmptyArray();
    steps.Append(Object({{"type", Str("Prepend")}, {"prepend", Str(kSpaceMarker)}}));
    steps.Append(std::move(replace));
    p.normalizer = Object({{"type", Str("Sequence")}, {"normalizers", std::move(steps)}});
  } else {
    p.normalizer = std::move(replace);
  }
  json::Value decoders = json::Value::EmptyArray();
  decoders.Append(Object({{"type", Str("Replace")},
                          {"pattern", Object({{"String", Str(kSpaceMarker)}})},
                          {"content", Str(" ")}}));
  decoders.Append(Object({{"type", Str("ByteFallback")}}));
  decoders.Append(Object({{"type", Str("Fuse")}}));
  if (add_space_prefix) {
    decoders.Append(Object({{"type", Str("Strip")},
                            {"content", Str(" ")},
                            {"start", json::Value::Int(1)},
                            {"stop", json::Value::Int(0)}}));
  }
  p.decoder = Object({{"type", Str("Sequence")}, {"decoders", std::move(decoders)}});
  return p;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const gguf::GgufFile& file) {
  const gguf::Value* model_value = file.Find("tokenizer.ggml.model");
  if (model_value == nullptr) return GgufError("the file carries no tokenizer (no tokenizer.ggml.model)");
  if (model_value->type != gguf::ValueType::kString) return GgufError("tokenizer.ggml.model must be a string");
  const std::string& model_name = model_value->s;
  if (model_name != "gpt2" && model_name != "llama") {
    return absl::UnimplementedError(absl::StrCat(
        "GGUF tokenizer: tokenizer.ggml.model \"", model_name,
        "\" is not supported (only \"gpt2\", byte-level BPE, and \"llama\", SentencePiece BPE)"));
  }
  const PreSpec* pre = nullptr;
  if (model_name == "gpt2") {
    GANTRY_ASSIGN_OR_RETURN(pre, ByteLevelPre(file));
  }
  const std::vector<gguf::Value>* tokens = nullptr;
  GANTRY_RETURN_IF_ERROR(StringArray(file, "tokenizer.ggml.tokens", true, &tokens));
  if (tokens->empty() || tokens->size() > (1u << 24)) return GgufError("tokenizer.ggml.tokens: bad size");
  GANTRY_ASSIGN_OR_RETURN(std::vector<int64_t> types, TokenTypes(file, tokens->size()));
  absl::StatusOr<Pipeline> pipeline = pre != nullptr ? ByteLevelPipeline(file, pre, *tokens, types)
                                                     : SentencePiecePipeline(file, *tokens, types);
  if (!pipeline.ok()) return pipeline.status();

  std::unique_ptr<Tokenizer> t(new Tokenizer());
  if (!pipeline->normalizer.is_null()) {
    auto normalizer = Normalizer::FromJson(pipeline->normalizer);
    if (!normalizer.ok()) return Relabel(normalizer.status());
    t->normalizer_ = std::move(normalizer).value();
  }
  if (!pipeline->pre_tokenizer.is_null()) {
    auto pre_tokenizer = PreTokenizer::FromJson(pipeline->pre_tokenizer);
    if (!pre_tokenizer.ok()) return Relabel(pre_tokenizer.status());
    t->pre_tokenizer_ = std::move(pre_tokenizer).value();
  }
  auto bpe = BpeModel::FromJson(pipeline->model, pipeline->byte_level);
  if (!bpe.ok()) return Relabel(bpe.status());
  t->model_ = std::move(bpe).value();
  auto vocabulary = AddedVocabulary::FromJson(&pipeline->added, t->normalizer_.get(),
                                              static_cast<int64_t>(tokens->size()) + 1);
  if (!vocabulary.ok()) return Relabel(vocabulary.status());
  t->added_ = std::make_unique<AddedVocabulary>(std::move(vocabulary).value());
  auto decoder = Decoder::FromJson(pipeline->decoder);
  if (!decoder.ok()) return Relabel(decoder.status());
  t->decoder_ = std::move(decoder).value();

  // Ids of the whole GGUF vocabulary, unused slots included: the model's n_vocab.
  t->vocab_size_ = static_cast<int32_t>(tokens->size());
  t->bos_id_ = OptionalId(file, "tokenizer.ggml.bos_token_id", tokens->size());
  t->eos_id_ = OptionalId(file, "tokenizer.ggml.eos_token_id", tokens->size());

  // add_special follows the GGUF's add_bos_token / add_eos_token (absent: llama.cpp's
  // default for the family: BOS for SentencePiece, nothing for byte-level; never EOS).
  json::Value single = json::Value::EmptyArray();
  json::Value specials = json::Value::EmptyObject();
  auto special = [&](const char* name, int32_t id) {
    single.Append(Object({{"SpecialToken", Object({{"id", Str(name)}, {"type_id", json::Value::Int(0)}})}}));
    json::Value ids = json::Value::EmptyArray();
    ids.Append(json::Value::Int(id));
    specials.members().emplace_back(name, Object({{"id", Str(name)}, {"ids", ids}}));
  };
  bool add_bos = OptionalBool(file, "tokenizer.ggml.add_bos_token", pipeline->default_add_bos) &&
                 t->bos_id_.has_value();
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
