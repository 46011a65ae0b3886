// The models a router serves (--models FILE) and how it renders and counts a request
// for each: the model's chat template and tokenizer (tokenizer-svc), loaded from the
// model's tokenizer directory.
#ifndef GANTRY_ROUTER_MODEL_CATALOG_H_
#define GANTRY_ROUTER_MODEL_CATALOG_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gantry/v1/inference.pb.h"
#include "policy/policy_types.h"
#include "router/request_evidence.h"

namespace gantry::router {

// Renders a request with a model's chat template and counts its tokens.
// Thread-safety: Render() is called from many threads at once.
class PromptCounter {
 public:
  virtual ~PromptCounter() = default;
  // Errors: INVALID_ARGUMENT template_render_failed (the template rejected the
  // messages), invalid_request (text the tokenizer cannot encode);
  // context_length_exceeded when the prompt has more than `max_tokens` tokens
  // (0: no limit), found without tokenizing all of a longer one.
  virtual absl::StatusOr<RenderedPrompt> Render(const v1::InferenceRequest& request,
                                                uint32_t max_tokens) const = 0;
};

// The real counter: tokenizer-svc's ChatTemplate + Tokenizer (tokenizer.json and
// tokenizer_config.json of one directory, or texts for tests).
absl::StatusOr<std::shared_ptr<const PromptCounter>> LoadPromptCounter(const std::string& dir);
absl::StatusOr<std::shared_ptr<const PromptCounter>> MakePromptCounter(
    absl::string_view template_source, absl::string_view tokenizer_json,
    absl::string_view tokenizer_config_json);

// The conversation object HF's apply_chat_template receives for `request`
// (messages, tools, add_generation_prompt: true, template kwargs).
std::string ConversationJsonForTest(const v1::InferenceRequest& request);

struct ModelEntry {
  std::string name;
  std::shared_ptr<const PromptCounter> counter;
  uint32_t context_length = 0;
  std::string tool_protocol;  // "" when the bundle declares none
  uint32_t default_max_tokens = policy::kDefaultMaxTokens;
};

// --models FILE: {"models": [{"name", "tokenizer_dir", "context_length",
// "tool_protocol", "default_max_tokens"}]}; a relative tokenizer_dir is relative to the
// file's directory. Errors: NOT_FOUND, invalid_json, invalid_request (naming the field).
absl::StatusOr<std::map<std::string, ModelEntry>> LoadModelCatalog(const std::string& path);

}  // namespace gantry::router

#endif  // GANTRY_ROUTER_MODEL_CATALOG_H_
