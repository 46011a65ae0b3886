#include "tokenizer-svc/tokenizer/spm_test_gguf.h"

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_replace.h"
#include "common/file.h"
#include "common/json.h"
#include "common/status.h"
#include "worker/gguf/gguf.h"

namespace gantry::tokenizer {
namespace {

// tokenizer.json's "merges" entry as its two parts ("a b" or ["a", "b"]).
std::pair<std::string, std::string> MergeParts(const json::Value& m) {
  if (m.is_string()) {
    const std::string& s = m.as_string();
    size_t space = s.find(' ');
    return {s.substr(0, space), s.substr(space + 1)};
  }
  return {m.items()[0].as_string(), m.items()[1].as_string()};
}

// Special enough for llama.cpp's converter to mark CONTROL whatever the file says.
bool LooksSpecial(const std::string& t) {
  auto wrapped = [&](const std::string& open, const std::string& close) {
    return t.size() >= open.size() + close.size() && t.compare(0, open.size(), open) == 0 &&
           t.compare(t.size() - close.size(), close.size(), close) == 0;
  };
  return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" || wrapped("<|", "|>") ||
         wrapped("<ï½", "ï½>") || wrapped("<unused", ">");
}

// A tokenizer-only GGUF of a SentencePiece-style tokenizer.json (byte fallback), with
// the metadata llama.cpp's converter writes for one (see the top of this file).
}  // namespace

absl::Status WriteSentencePieceGgufForTest(const std::string& dir, const std::string& path) {
  GANTRY_ASSIGN_OR_RETURN(std::string tj_text, ReadFileToString(dir + "/tokenizer.json"));
  GANTRY_ASSIGN_OR_RETURN(std::string config_text, ReadFileToString(dir + "/tokenizer_config.json"));
  GANTRY_ASSIGN_OR_RETURN(json::Value tj, json::Parse(tj_text));
  GANTRY_ASSIGN_OR_RETURN(json::Value config, json::Parse(config_text));
  const json::Value* model_value = tj.Find("model");
  if (model_value == nullptr || model_value->Find("merges") == nullptr || model_value->Find("vocab") == nullptr ||
      model_value->Find("unk_token") == nullptr || tj.Find("added_tokens") == nullptr) {
    return absl::InvalidArgumentError(dir + ": not a SentencePiece-style BPE tokenizer.json");
  }
  const json::Value& model = *model_value;
  std::map<std::string, int64_t> first_merge;
  const auto& merges = model.Find("merges")->items();
  for (size_t i = 0; i < merges.size(); ++i) {
    auto [l, r] = MergeParts(merges[i]);
    first_merge.emplace(l + r, static_cast<int64_t>(i));
  }
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<float> scores;
  auto slot = [&](int64_t id) {
    while (static_cast<int64_t>(tokens.size()) <= id) {
      tokens.push_back("[PAD" + std::to_string(tokens.size()) + "]");
      types.push_back(5);  // UNUSED
      scores.push_back(-10000.0f);
    }
  };
  const std::string unk = model.Find("unk_token")->as_string();
  for (const auto& [piece, id_value] : model.Find("vocab")->members()) {
    int64_t id = *id_value.as_int64();
    slot(id);
    tokens[id] = piece;
    bool byte = piece.size() == 6 && piece.compare(0, 3, "<0x") == 0 && piece[5] == '>';
    types[id] = byte ? 6 : piece == unk ? 2 : 1;
    auto merge = first_merge.find(piece);
    scores[id] = types[id] != 1                ? 0.0f
                 : merge != first_merge.end() ? -static_cast<float>(merge->second)
                                              : -static_cast<float>(merges.size() + id);
  }
  for (const json::Value& added : tj.Find("added_tokens")->items()) {
    int64_t id = *added.Find("id")->as_int64();
    std::string content = added.Find("content")->as_string();
    slot(id);
    if (added.Find("special")->as_bool() || LooksSpecial(content)) {
      types[id] = 3;  // CONTROL
    } else {
      types[id] = 4;  // USER_DEFINED, spaces "pre-normalized" as the converter does
      content = absl::StrReplaceAll(content, {{"â", " "}});
    }
    tokens[id] = content;
    scores[id] = -1000.0f;
  }
  auto id_of = [&](const char* key) -> int64_t {
    const json::Value* v = config.Find(key);
    if (v == nullptr || !v->is_string()) return -1;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] == v->as_string()) return static_cast<int64_t>(i);
    }
    return -1;
  };
  const json::Value* normalizer = tj.Find("normalizer");
  bool prepends = normalizer != nullptr && json::DumpCompact(*normalizer).find("Prepend") != std::string::npos;
  gguf::GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddString("tokenizer.ggml.model", "llama");
  w.AddString("tokenizer.ggml.pre", "default");
  w.AddStringArray("tokenizer.ggml.tokens", tokens);
  w.AddFloat32Array("tokenizer.ggml.scores", scores);
  w.AddInt32Array("tokenizer.ggml.token_type", types);
  for (auto [key, name] : {std::pair<const char*, const char*>{"bos_token", "tokenizer.ggml.bos_token_id"},
                           {"eos_token", "tokenizer.ggml.eos_token_id"},
                           {"unk_token", "tokenizer.ggml.unknown_token_id"}}) {
    if (int64_t id = id_of(key); id >= 0) w.AddUint32(name, static_cast<uint32_t>(id));
  }
  for (auto [key, name] : {std::pair<const char*, const char*>{"add_bos_token", "tokenizer.ggml.add_bos_token"},
                           {"add_eos_token", "tokenizer.ggml.add_eos_token"}}) {
    if (const json::Value* v = config.Find(key); v != nullptr && v->is_bool()) w.AddBool(name, v->as_bool());
  }
  if (!prepends) w.AddBool("tokenizer.ggml.add_space_prefix", false);
  return w.WriteFile(path);
}

}  // namespace gantry::tokenizer
