#include "formats/testmodel/test_model.h"

#include <cmath>
#include <fstream>
#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/file.h"
#include "common/json.h"
#include "common/status.h"
#include "formats/gguf/quant.h"

namespace gantry::testmodel {
namespace {

using gguf::TensorType;

// llama.cpp token types.
constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6;

// SplitMix64 feeding Box-Muller: a small, portable, seeded normal generator (the
// weights need only be deterministic, not numpy-identical).
class Normal {
 public:
  explicit Normal(uint64_t seed) : state_(seed) {}
  float Next() {
    if (have_spare_) {
      have_spare_ = false;
      return spare_;
    }
    double u1 = (static_cast<double>(Bits() >> 11) + 0.5) / 9007199254740992.0;
    double u2 = static_cast<double>(Bits() >> 11) / 9007199254740992.0;
    double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = static_cast<float>(r * std::sin(2 * M_PI * u2));
    have_spare_ = true;
    return static_cast<float>(r * std::cos(2 * M_PI * u2));
  }

 private:
  uint64_t Bits() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t state_;
  bool have_spare_ = false;
  float spare_ = 0;
};

absl::StatusOr<json::Value> ReadJson(const std::string& path) {
  GANTRY_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  auto value = json::Parse(text);
  if (!value.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", value.status().message()));
  }
  return value;
}

// Same heuristic as llama.cpp's converter: tokens that look like control tokens.
bool LooksSpecial(const std::string& t) {
  return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" ||
         (absl::StartsWith(t, "<|") && absl::EndsWith(t, "|>")) ||
         (absl::StartsWith(t, "<\xEF\xBD\x9C") && absl::EndsWith(t, "\xEF\xBD\x9C>")) ||
         (absl::StartsWith(t, "<unused") && absl::EndsWith(t, ">"));
}

constexpr char kSpaceMarker[] = "\xE2\x96\x81";  // U+2581, SentencePiece's space

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<std::string> merges;  // byte-level only
  // SentencePiece (byte_fallback) vocabularies: scores instead of merges.
  bool sentencepiece = false;
  std::vector<float> scores;
  bool add_space_prefix = true;
  std::string unk_token;
  json::Value config;  // tokenizer_config.json, or an empty object
};

absl::StatusOr<Vocab> LoadVocab(const std::string& dir) {
  GANTRY_ASSIGN_OR_RETURN(json::Value tj, ReadJson(dir + "/tokenizer.json"));
  Vocab v;
  auto cfg = ReadJson(dir + "/tokenizer_config.json");
  v.config = cfg.ok() ? *cfg : json::Value::EmptyObject();
  const json::Value* model = tj.Find("model");
  if (!model || !model->Find("type") || model->Find("type")->as_string() != "BPE" ||
      !model->Find("vocab") || !model->Find("vocab")->is_object()) {
    return absl::InvalidArgumentError("tokenizer.json: model must be BPE with a vocab");
  }
  if (const json::Value* fallback = model->Find("byte_fallback");
      fallback && fallback->is_bool() && fallback->as_bool()) {
    v.sentencepiece = true;
    if (const json::Value* unk = model->Find("unk_token"); unk && unk->is_string()) v.unk_token = unk->as_string();
    const json::Value* normalizer = tj.Find("normalizer");
    v.add_space_prefix = normalizer && json::DumpCompact(*normalizer).find("\"Prepend\"") != std::string::npos;
  }
  std::map<int64_t, std::string> by_id;
  for (const auto& [token, id] : model->Find("vocab")->members()) {
    auto i = id.as_int64();
    if (!i || *i < 0 || *i > (1 << 24)) return absl::InvalidArgumentError("tokenizer.json: bad id");
    by_id[*i] = token;
  }
  std::map<int64_t, std::pair<std::string, bool>> added;
  if (const json::Value* list = tj.Find("added_tokens"); list && list->is_array()) {
    for (const json::Value& a : list->items()) {
      const json::Value* id = a.Find("id");
      const json::Value* content = a.Find("content");
      const json::Value* special = a.Find("special");
      if (!id || !id->as_int64() || !content || !content->is_string()) continue;
      added[*id->as_int64()] = {content->as_string(), special && special->is_bool() && special->as_bool()};
    }
  }
  int64_t n = 0;
  if (!by_id.empty()) n = by_id.rbegin()->first + 1;
  if (!added.empty()) n = std::max(n, added.rbegin()->first + 1);
  if (const json::Value* merges = model->Find("merges"); merges && merges->is_array()) {
    for (const json::Value& m : merges->items()) {
      if (m.is_string()) {
        v.merges.push_back(m.as_string());
      } else if (m.is_array() && m.items().size() == 2 && m.items()[0].is_string() &&
                 m.items()[1].is_string()) {
        v.merges.push_back(absl::StrCat(m.items()[0].as_string(), " ", m.items()[1].as_string()));
      }
    }
  }
  // SentencePiece: the rank of the first merge making each piece stands in for its score
  // (the real scores live in tokenizer.model, which HF ranked its merges by).
  std::map<std::string, int64_t> first_merge;
  if (v.sentencepiece) {
    for (size_t r = 0; r < v.merges.size(); ++r) {
      const std::string& m = v.merges[r];
      size_t space = m.find(' ');
      if (space != std::string::npos) first_merge.emplace(m.substr(0, space) + m.substr(space + 1), r);
    }
  }
  const float merges_count = static_cast<float>(v.merges.size());
  for (int64_t i = 0; i < n; ++i) {
    if (auto it = added.find(i); it != added.end()) {
      std::string text = it->second.first;
      const bool control = it->second.second || LooksSpecial(text);
      // llama.cpp's converter "pre-normalizes" the spaces of user-defined pieces.
      if (v.sentencepiece && !control) text = absl::StrReplaceAll(text, {{kSpaceMarker, " "}});
      v.tokens.push_back(text);
      v.types.push_back(control ? kControl : kUserDefined);
      v.scores.push_back(-1000.0f);
    } else if (auto jt = by_id.find(i); jt != by_id.end()) {
      const std::string& piece = jt->second;
      v.tokens.push_back(piece);
      if (v.sentencepiece && piece.size() == 6 && absl::StartsWith(piece, "<0x") && piece[5] == '>') {
        v.types.push_back(kByte);
        v.scores.push_back(0.0f);
      } else if (v.sentencepiece && piece == v.unk_token) {
        v.types.push_back(kUnknown);
        v.scores.push_back(0.0f);
      } else {
        v.types.push_back(kNormal);
        auto merge = first_merge.find(piece);
        v.scores.push_back(merge != first_merge.end() ? -static_cast<float>(merge->second)
                                                      : -(merges_count + static_cast<float>(i)));
      }
    } else {
      v.tokens.push_back(absl::StrCat("[PAD", i, "]"));
      v.types.push_back(kUnused);
      v.scores.push_back(-10000.0f);
    }
  }
  if (v.sentencepiece) v.merges.clear();  // a SentencePiece GGUF carries none
  return v;
}

int64_t IndexOf(const std::vector<std::string>& tokens, const std::string& t) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] == t) return static_cast<int64_t>(i);
  }
  return -1;
}

std::string SpecialFromConfig(const json::Value& cfg, const char* key) {
  const json::Value* v = cfg.Find(key);
  if (!v) return "";
  if (v->is_string()) return v->as_string();
  if (v->is_object() && v->Find("content") && v->Find("content")->is_string()) {
    return v->Find("content")->as_string();
  }
  return "";
}

// The tokenizer.ggml.* of a SentencePiece vocabulary, as llama.cpp's converter writes
// them (no merges: scores).
void AddSentencePieceVocab(const Vocab& vocab, gguf::GgufWriter* out) {
  gguf::GgufWriter& w = *out;
  w.AddString("tokenizer.ggml.model", "llama");
  w.AddString("tokenizer.ggml.pre", "default");
  w.AddStringArray("tokenizer.ggml.tokens", vocab.tokens);
  w.AddFloat32Array("tokenizer.ggml.scores", vocab.scores);
  w.AddInt32Array("tokenizer.ggml.token_type", vocab.types);
  for (auto [key, name] : {std::pair<const char*, const char*>{"bos_token", "tokenizer.ggml.bos_token_id"},
                           {"eos_token", "tokenizer.ggml.eos_token_id"},
                           {"unk_token", "tokenizer.ggml.unknown_token_id"}}) {
    int64_t id = IndexOf(vocab.tokens, SpecialFromConfig(vocab.config, key));
    if (id >= 0) w.AddUint32(name, static_cast<uint32_t>(id));
  }
  for (auto [key, name] : {std::pair<const char*, const char*>{"add_bos_token", "tokenizer.ggml.add_bos_token"},
                           {"add_eos_token", "tokenizer.ggml.add_eos_token"}}) {
    if (const json::Value* b = vocab.config.Find(key); b && b->is_bool()) w.AddBool(name, b->as_bool());
  }
  if (!vocab.add_space_prefix) w.AddBool("tokenizer.ggml.add_space_prefix", false);
}

// The tokenizer.ggml.* of a byte-level BPE vocabulary, as llama.cpp's converter writes them.
void AddByteLevelVocab(const Vocab& vocab, gguf::GgufWriter* out) {
  gguf::GgufWriter& w = *out;
  const bool is_qwen_vocab = IndexOf(vocab.tokens, "<|im_start|>") >= 0;
  w.AddString("tokenizer.ggml.model", "gpt2");
  w.AddString("tokenizer.ggml.pre", is_qwen_vocab ? "qwen2" : "llama-bpe");
  w.AddStringArray("tokenizer.ggml.tokens", vocab.tokens);
  w.AddInt32Array("tokenizer.ggml.token_type", vocab.types);
  w.AddStringArray("tokenizer.ggml.merges", vocab.merges);
  if (is_qwen_vocab) {
    const int64_t eot = IndexOf(vocab.tokens, "<|endoftext|>");
    int64_t eos = IndexOf(vocab.tokens, SpecialFromConfig(vocab.config, "eos_token"));
    if (eos < 0) eos = IndexOf(vocab.tokens, "<|im_end|>");
    if (eot >= 0) w.AddUint32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(eot));
    if (eos >= 0) w.AddUint32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(eos));
    if (eot >= 0) w.AddUint32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(eot));
    w.AddBool("tokenizer.ggml.add_bos_token", false);
  } else {
    const int64_t bos = IndexOf(vocab.tokens, SpecialFromConfig(vocab.config, "bos_token"));
    int64_t eos = IndexOf(vocab.tokens, "<|eot_id|>");
    if (eos < 0) eos = IndexOf(vocab.tokens, SpecialFromConfig(vocab.config, "eos_token"));
    if (bos >= 0) w.AddUint32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(bos));
    if (eos >= 0) w.AddUint32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(eos));
    w.AddBool("tokenizer.ggml.add_bos_token", true);
  }
}

uint32_t FileTypeOf(TensorType t) {
  switch (t) {
    case TensorType::kF32: return 0;
    case TensorType::kF16: return 1;
    case TensorType::kQ4_0: return 2;
    case TensorType::kQ8_0: return 7;
    case TensorType::kBF16: return 32;
    // llama.cpp's file types; a pure Q4_K / Q5_K file is labelled as its _S mix.
    case TensorType::kQ4_K: return 14;
    case TensorType::kQ5_K: return 16;
    case TensorType::kQ6_K: return 18;
    default: return 1;
  }
}

constexpr uint32_t kFileTypeQ4_K_M = 15;

}  // namespace

bool ParseWeightType(const std::string& name, gguf::TensorType* type) {
  static const std::map<std::string, TensorType> kTypes = {
      {"f32", TensorType::kF32}, {"f16", TensorType::kF16}, {"bf16", TensorType::kBF16},
      {"q8_0", TensorType::kQ8_0}, {"q4_0", TensorType::kQ4_0}, {"q4_k", TensorType::kQ4_K},
      {"q5_k", TensorType::kQ5_K}, {"q6_k", TensorType::kQ6_K}};
  auto it = kTypes.find(name);
  if (it == kTypes.end()) return false;
  *type = it->second;
  return true;
}

bool ParseWeights(const std::string& name, TestModelOptions* options) {
  options->q4_k_m = name == "q4_k_m";
  return options->q4_k_m || ParseWeightType(name, &options->weight_type);
}

bool UsesMoreBits(uint32_t layer, uint32_t n_layer) {
  const int i = static_cast<int>(layer), n = static_cast<int>(n_layer);
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

absl::StatusOr<TestModelSummary> MakeTestModel(const TestModelOptions& options, const std::string& path) {
  TestModelOptions o = options;
  if (o.q4_k_m) o.weight_type = o.embedding_type = TensorType::kQ4_K;
  const bool qwen3 = o.arch == "qwen3";
  if (!qwen3 && o.arch != "llama") return absl::InvalidArgumentError("arch must be llama or qwen3");
  if (o.n_layer == 0 || o.n_embd == 0 || o.n_head == 0 || o.n_head_kv == 0 ||
      o.n_head % o.n_head_kv != 0) {
    return absl::InvalidArgumentError("need n_layer, n_embd, n_head > 0 and n_head a multiple of n_head_kv");
  }
  const uint32_t hd = o.head_dim ? o.head_dim : o.n_embd / o.n_head;
  if (!qwen3 && hd * o.n_head != o.n_embd) {
    return absl::InvalidArgumentError("llama needs n_embd == n_head * head_dim");
  }
  if (hd % 2) return absl::InvalidArgumentError("head_dim must be even (rope)");
  const uint32_t ff = o.n_ff ? o.n_ff : 3 * o.n_embd;
  for (TensorType t : {o.weight_type, o.embedding_type}) {
    if (gguf::IsKQuant(t) && (o.n_embd % 256 || (o.n_head * hd) % 256 || ff % 256)) {
      return absl::InvalidArgumentError(absl::StrCat(
          gguf::TensorTypeName(t), " needs n_embd, n_head * head_dim and n_ff to be multiples of 256 (got ",
          o.n_embd, ", ", o.n_head * hd, ", ", ff, ")"));
    }
  }
  GANTRY_ASSIGN_OR_RETURN(Vocab vocab, LoadVocab(o.tokenizer_dir));
  const uint32_t n_vocab = static_cast<uint32_t>(vocab.tokens.size());
  const float rope_base = o.rope_base > 0 ? o.rope_base : (qwen3 ? 1e6f : 5e5f);

  gguf::GgufWriter w;
  const std::string& a = o.arch;
  w.AddString("general.architecture", a);
  w.AddString("general.name", o.name.empty() ? absl::StrCat("gantry-test-", a) : o.name);
  w.AddUint32("general.file_type", o.q4_k_m ? kFileTypeQ4_K_M : FileTypeOf(o.weight_type));
  w.AddUint32("general.quantization_version", 2);
  w.AddUint32("general.alignment", gguf::kDefaultAlignment);
  w.AddUint32(a + ".context_length", o.context_length);
  w.AddUint32(a + ".embedding_length", o.n_embd);
  w.AddUint32(a + ".block_count", o.n_layer);
  w.AddUint32(a + ".feed_forward_length", ff);
  w.AddUint32(a + ".attention.head_count", o.n_head);
  w.AddUint32(a + ".attention.head_count_kv", o.n_head_kv);
  w.AddFloat32(a + ".attention.layer_norm_rms_epsilon", o.rms_eps);
  w.AddFloat32(a + ".rope.freq_base", rope_base);
  if (qwen3) {
    w.AddUint32(a + ".attention.key_length", hd);
    w.AddUint32(a + ".attention.value_length", hd);
  } else {
    w.AddUint32(a + ".rope.dimension_count", hd);
    w.AddUint32(a + ".vocab_size", n_vocab);
  }
  if (vocab.sentencepiece) {
    AddSentencePieceVocab(vocab, &w);
  } else {
    AddByteLevelVocab(vocab, &w);
  }
  if (const json::Value* tpl = vocab.config.Find("chat_template"); tpl && tpl->is_string()) {
    w.AddString("tokenizer.chat_template", tpl->as_string());
  }

  Normal rng(o.seed);
  TestModelSummary summary;
  summary.vocab_size = n_vocab;
  // rows x cols in ggml order {cols, rows}: each of `rows` rows holds `cols` values.
  auto add = [&](const std::string& name, uint64_t rows, uint64_t cols, TensorType type,
                 float mean, float stddev) -> absl::Status {
    std::vector<float> x(rows * cols);
    for (float& v : x) v = mean + stddev * rng.Next();
    std::string bytes;
    GANTRY_RETURN_IF_ERROR(gguf::EncodeTensor(x.data(), x.size(), type, &bytes));
    summary.parameters += x.size();
    std::vector<uint64_t> dims = rows == 1 ? std::vector<uint64_t>{cols} : std::vector<uint64_t>{cols, rows};
    return w.AddTensor(name, dims, type, std::move(bytes));
  };
  const float e = static_cast<float>(o.n_embd);
  const TensorType wt = o.weight_type, f32 = TensorType::kF32;
  // Q4_K_M: Q6_K where llama.cpp's mix keeps more bits.
  const TensorType head_type = o.q4_k_m ? TensorType::kQ6_K : wt;
  const TensorType embd_type = o.q4_k_m && o.tied ? head_type : o.embedding_type;
  GANTRY_RETURN_IF_ERROR(add("token_embd.weight", n_vocab, o.n_embd, embd_type, 0, 1.0f));
  for (uint32_t l = 0; l < o.n_layer; ++l) {
    const std::string p = absl::StrCat("blk.", l, ".");
    const TensorType more = o.q4_k_m && UsesMoreBits(l, o.n_layer) ? TensorType::kQ6_K : wt;
    GANTRY_RETURN_IF_ERROR(add(p + "attn_norm.weight", 1, o.n_embd, f32, 1.0f, 0.1f));
    GANTRY_RETURN_IF_ERROR(add(p + "attn_q.weight", o.n_head * hd, o.n_embd, wt, 0, 1 / std::sqrt(e)));
    GANTRY_RETURN_IF_ERROR(add(p + "attn_k.weight", o.n_head_kv * hd, o.n_embd, wt, 0, 1 / std::sqrt(e)));
    GANTRY_RETURN_IF_ERROR(add(p + "attn_v.weight", o.n_head_kv * hd, o.n_embd, more, 0, 1 / std::sqrt(e)));
    GANTRY_RETURN_IF_ERROR(add(p + "attn_output.weight", o.n_embd, o.n_head * hd, wt, 0,
                               1 / std::sqrt(static_cast<float>(o.n_head * hd))));
    if (qwen3) {
      GANTRY_RETURN_IF_ERROR(add(p + "attn_q_norm.weight", 1, hd, f32, 1.0f, 0.1f));
      GANTRY_RETURN_IF_ERROR(add(p + "attn_k_norm.weight", 1, hd, f32, 1.0f, 0.1f));
    }
    GANTRY_RETURN_IF_ERROR(add(p + "ffn_norm.weight", 1, o.n_embd, f32, 1.0f, 0.1f));
    GANTRY_RETURN_IF_ERROR(add(p + "ffn_gate.weight", ff, o.n_embd, wt, 0, 1 / std::sqrt(e)));
    GANTRY_RETURN_IF_ERROR(add(p + "ffn_up.weight", ff, o.n_embd, wt, 0, 1 / std::sqrt(e)));
    GANTRY_RETURN_IF_ERROR(add(p + "ffn_down.weight", o.n_embd, ff, more, 0,
                               1 / std::sqrt(static_cast<float>(ff))));
  }
  GANTRY_RETURN_IF_ERROR(add("output_norm.weight", 1, o.n_embd, f32, 1.0f, 0.1f));
  if (!o.tied) {
    // A wider head gives clear top-1 margins, so greedy runs are robust to rounding.
    GANTRY_RETURN_IF_ERROR(add("output.weight", n_vocab, o.n_embd, head_type, 0, 4 / std::sqrt(e)));
  }
  GANTRY_RETURN_IF_ERROR(w.WriteFile(path));
  std::ifstream written(path, std::ios::binary | std::ios::ate);
  summary.bytes = static_cast<uint64_t>(written.tellg());
  return summary;
}

}  // namespace gantry::testmodel
