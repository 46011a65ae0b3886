#include "worker/server/serving.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "tokenizer-svc/bundle_text/bundle_text.h"

namespace gantry::server {
namespace {

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
  GANTRY_ASSIGN_OR_RETURN(bundle_text::BundleText text, bundle_text::LoadBundleText(*b->bundle_, *b->gguf_));
  b->tokenizer_ = std::move(text.tokenizer);
  b->template_ = std::move(text.chat_template);

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
  s.vocabulary = constrain::Vocabulary::FromTokenizer(*b->tokenizer_);
  if (!script_path.empty()) {
    GANTRY_ASSIGN_OR_RETURN(Script script, Script::Load(script_path));
    b->script_ = std::make_unique<Script>(std::move(script));
    s.script = b->script_.get();
  }
  return b;
}

}  // namespace gantry::server
