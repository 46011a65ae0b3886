// The pinned tokenizer and chat template of a verified bundle, built exactly from the
// bundle's own assets (tokenizer.json + tokenizer_config.json, or the GGUF's
// vocabulary; chat_template.jinja with the special-token variables HF passes). The worker
// (to run prompts) and the tokenizer service (to count them) load them the same way.
//
// Thread-safety: pure function of its inputs.
#ifndef GANTRY_TOKENIZER_SVC_BUNDLE_TEXT_BUNDLE_TEXT_H_
#define GANTRY_TOKENIZER_SVC_BUNDLE_TEXT_BUNDLE_TEXT_H_

#include <memory>

#include "absl/status/statusor.h"
#include "formats/bundle/bundle.h"
#include "formats/gguf/gguf.h"
#include "tokenizer-svc/jinja/chat_template.h"
#include "tokenizer-svc/tokenizer/tokenizer.h"

namespace gantry::bundle_text {

struct BundleText {
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
  std::unique_ptr<jinja::ChatTemplate> chat_template;
};

// `gguf` is the bundle's weights file, opened (its vocabulary is the tokenizer when the
// manifest says so). Errors: those of the tokenizer and template loaders, NOT_FOUND for
// a missing asset.
absl::StatusOr<BundleText> LoadBundleText(const bundle::Bundle& bundle, const gguf::GgufFile& gguf);

}  // namespace gantry::bundle_text

#endif  // GANTRY_TOKENIZER_SVC_BUNDLE_TEXT_BUNDLE_TEXT_H_
