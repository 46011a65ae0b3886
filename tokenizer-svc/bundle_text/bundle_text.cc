#include "tokenizer-svc/bundle_text/bundle_text.h"

#include "common/file.h"
#include "common/json.h"
#include "common/status.h"

namespace gantry::bundle_text {

absl::StatusOr<BundleText> LoadBundleText(const bundle::Bundle& b, const gguf::GgufFile& gguf) {
  BundleText text;
  const auto& manifest = b.manifest();
  std::string config_json;
  if (manifest.tokenizer_config) {
    GANTRY_ASSIGN_OR_RETURN(config_json, ReadFileToString(b.PathOf(*manifest.tokenizer_config)));
  }
  if (manifest.tokenizer_source == bundle::TokenizerSource::kGguf) {
    GANTRY_ASSIGN_OR_RETURN(text.tokenizer, tokenizer::Tokenizer::FromGguf(gguf));
  } else {
    GANTRY_ASSIGN_OR_RETURN(std::string tokenizer_json, ReadFileToString(b.TokenizerPath()));
    GANTRY_ASSIGN_OR_RETURN(text.tokenizer, tokenizer::Tokenizer::FromJson(tokenizer_json, config_json));
  }
  // The template variables HF passes: the special tokens of tokenizer_config.json when
  // the bundle pins one, else the tokenizer's BOS/EOS text.
  json::Value specials = json::Value::EmptyObject();
  if (!config_json.empty()) {
    GANTRY_ASSIGN_OR_RETURN(json::Value config, json::Parse(config_json));
    for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
      const json::Value* v = config.Find(key);
      if (v && v->is_string()) specials.Set(key, *v);
      if (v && v->is_object() && v->Find("content")) specials.Set(key, *v->Find("content"));
    }
  } else {
    if (auto bos = text.tokenizer->bos_id()) {
      if (auto t = text.tokenizer->TokenText(*bos)) specials.Set("bos_token", json::Value::String(*t));
    }
    if (auto eos = text.tokenizer->eos_id()) {
      if (auto t = text.tokenizer->TokenText(*eos)) specials.Set("eos_token", json::Value::String(*t));
    }
  }
  GANTRY_ASSIGN_OR_RETURN(std::string source, ReadFileToString(b.ChatTemplatePath()));
  GANTRY_ASSIGN_OR_RETURN(jinja::ChatTemplate tpl, jinja::ChatTemplate::FromSource(source, specials));
  text.chat_template = std::make_unique<jinja::ChatTemplate>(std::move(tpl));
  return text;
}

}  // namespace gantry::bundle_text
