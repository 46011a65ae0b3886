#include "worker/server/serving.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "common/status.h"

namespace gantry::server {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// End-of-turn tokens of the common template families. Looking them up in the vocabulary
// (as llama.cpp's end-of-generation set does) is not choosing a parser by model name:
// a token ends generation only if this vocabulary marks it special.
constexpr const char* kEndOfTurnTokens[] = {"<|im_end|>", "<|eot_id|>", "<|endoftext|>",
                                            "<|end_of_text|>", "</s>", "<end_of_turn>",
                                            "<eos>", "<|end|>", "<|eom_id|>"};

}  // namespace

absl::StatusOr<std::unique_ptr<LoadedBundle>> LoadedBundle::Load(const std::string& dir,
                                                                 const std::string& script_path) {
  std::unique_ptr<LoadedBundle> b(new LoadedBundle());
  GANTRY_ASSIGN_OR_RETURN(bundle::Bundle verified, bundle::LoadAndVerify(dir));
  b->bundle_ = std::make_unique<bundle::Bundle>(std::move(verified));
  GANTRY_ASSIGN_OR_RETURN(b->gguf_, bundle::OpenGguf(b->bundle_->WeightsPath()));
  GANTRY_ASSIGN_OR_RETURN(b->model_, model::Model::Load(*b->gguf_));
  const auto& manifest = b->bundle_->manifest();
  if (manifest.tokenizer_source == bundle::TokenizerSource::kGguf) {
    GANTRY_ASSIGN_OR_RETURN(b->tokenizer_, tokenizer::Tokenizer::FromGguf(*b->gguf_));
  } else {
    // Exactly the pinned files: tokenizer.json and, when pinned, tokenizer_config.json.
    GANTRY_ASSIGN_OR_RETURN(std::string tokenizer_json, ReadFile(b->bundle_->TokenizerPath()));
    std::string config_json;
    if (manifest.tokenizer_config) {
      GANTRY_ASSIGN_OR_RETURN(config_json, ReadFile(b->bundle_->PathOf(*manifest.tokenizer_config)));
    }
    GANTRY_ASSIGN_OR_RETURN(b->tokenizer_, tokenizer::Tokenizer::FromJson(tokenizer_json, config_json));
  }

  // The pinned template text, with the special-token variables HF passes: from
  // tokenizer_config.json when the bundle has one, else the tokenizer's BOS/EOS text.
  GANTRY_ASSIGN_OR_RETURN(std::string source, ReadFile(b->bundle_->ChatTemplatePath()));
  json::Value specials = json::Value::EmptyObject();
  if (manifest.tokenizer_config) {
    GANTRY_ASSIGN_OR_RETURN(std::string config_text, ReadFile(b->bundle_->PathOf(*manifest.tokenizer_config)));
    auto config = json::Parse(config_text);
    if (!config.ok()) return config.status();
    for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
      const json::Value* v = config->Find(key);
      if (v && v->is_string()) specials.Set(key, *v);
      if (v && v->is_object() && v->Find("content")) specials.Set(key, *v->Find("content"));
    }
  } else {
    if (auto bos = b->tokenizer_->bos_id()) {
      if (auto text = b->tokenizer_->TokenText(*bos)) specials.Set("bos_token", json::Value::String(*text));
    }
    if (auto eos = b->tokenizer_->eos_id()) {
      if (auto text = b->tokenizer_->TokenText(*eos)) specials.Set("eos_token", json::Value::String(*text));
    }
  }
  GANTRY_ASSIGN_OR_RETURN(jinja::ChatTemplate tpl, jinja::ChatTemplate::FromSource(source, specials));
  b->template_ = std::make_unique<jinja::ChatTemplate>(std::move(tpl));

  ServingBundle& s = b->serving_;
  s.identity = b->bundle_->Identity();
  s.model = b->model_.get();
  s.tokenizer = b->tokenizer_.get();
  s.chat_template = b->template_.get();
  if (auto eos = b->tokenizer_->eos_id()) s.stop_ids.push_back(*eos);
  if (auto eos = b->gguf_->GetUint("tokenizer.ggml.eos_token_id"); eos.ok()) {
    s.stop_ids.push_back(static_cast<int32_t>(*eos));
  }
  for (const char* text : kEndOfTurnTokens) {
    if (auto id = b->tokenizer_->TokenId(text); id && b->tokenizer_->IsSpecial(*id)) s.stop_ids.push_back(*id);
  }
  std::sort(s.stop_ids.begin() + (s.stop_ids.empty() ? 0 : 1), s.stop_ids.end());
  s.stop_ids.erase(std::unique(s.stop_ids.begin(), s.stop_ids.end()), s.stop_ids.end());
  if (s.stop_ids.empty()) {
    return absl::FailedPreconditionError("the bundle's tokenizer has no end-of-generation token");
  }
  if (!script_path.empty()) {
    GANTRY_ASSIGN_OR_RETURN(Script script, Script::Load(script_path));
    b->script_ = std::make_unique<Script>(std::move(script));
    s.script = b->script_.get();
  }
  return b;
}

}  // namespace gantry::server
