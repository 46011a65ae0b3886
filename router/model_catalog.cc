#include "router/model_catalog.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/error_codes.h"
#include "common/file.h"
#include "common/json.h"
#include "common/status.h"
#include "tokenizer-svc/conversation/conversation.h"
#include "tokenizer-svc/conversation/prompt.h"
#include "tokenizer-svc/jinja/chat_template.h"
#include "tokenizer-svc/tokenizer/tokenizer.h"

namespace gantry::router {
namespace {

using json::Value;

// ---- prompt counting ---------------------------------------------------------------

class TemplateTokenizerCounter : public PromptCounter {
 public:
  TemplateTokenizerCounter(jinja::ChatTemplate chat_template,
                           std::unique_ptr<tokenizer::Tokenizer> tokenizer)
      : template_(std::move(chat_template)), tokenizer_(std::move(tokenizer)) {}

  absl::StatusOr<RenderedPrompt> Render(const v1::InferenceRequest& request,
                                        uint32_t max_tokens) const override {
    // The same function the worker runs the prompt with: the count admitted is the
    // prompt served, client text that imitates a control token included (prompt.h).
    // The tools cache keeps an agent's tool definitions converted from turn to turn
    // (exact: the prompt is the one an uncached build gives).
    auto prompt =
        conversation::BuildPrompt(template_, *tokenizer_, request, &tools_cache_, max_tokens);
    if (absl::IsOutOfRange(prompt.status())) {
      return ReasonError("context_length_exceeded",
                         absl::StrCat("the prompt has more than ", max_tokens, " tokens"));
    }
    if (!prompt.ok()) return prompt.status();
    RenderedPrompt out;
    out.tokens = static_cast<uint32_t>(prompt->ids.size());
    out.token_ids_sha256 = PromptIdsSha256Hex(prompt->ids);
    out.text = std::move(prompt->text);
    return out;
  }

 private:
  jinja::ChatTemplate template_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  mutable conversation::ToolsCache tools_cache_;  // internally synchronized
};

}  // namespace

std::string ConversationJsonForTest(const v1::InferenceRequest& request) {
  return json::DumpCompact(conversation::TemplateConversation(request));
}

absl::StatusOr<std::shared_ptr<const PromptCounter>> MakePromptCounter(
    absl::string_view template_source, absl::string_view tokenizer_json,
    absl::string_view tokenizer_config_json) {
  Value specials = Value::EmptyObject();
  if (!tokenizer_config_json.empty()) {
    auto config = json::Parse(tokenizer_config_json);
    if (!config.ok()) return config.status();
    auto from_config = jinja::ChatTemplate::FromConfig(*config);
    if (template_source.empty()) {
      if (!from_config.ok()) return from_config.status();
      auto tok = tokenizer::Tokenizer::FromJson(tokenizer_json, tokenizer_config_json);
      if (!tok.ok()) return tok.status();
      return std::shared_ptr<const PromptCounter>(
          std::make_shared<TemplateTokenizerCounter>(std::move(*from_config), std::move(*tok)));
    }
  }
  auto chat_template = jinja::ChatTemplate::FromSource(template_source, specials);
  if (!chat_template.ok()) return chat_template.status();
  auto tok = tokenizer::Tokenizer::FromJson(tokenizer_json, tokenizer_config_json);
  if (!tok.ok()) return tok.status();
  return std::shared_ptr<const PromptCounter>(
      std::make_shared<TemplateTokenizerCounter>(std::move(*chat_template), std::move(*tok)));
}

absl::StatusOr<std::shared_ptr<const PromptCounter>> LoadPromptCounter(const std::string& dir) {
  auto chat_template = jinja::ChatTemplate::Load(dir);
  if (!chat_template.ok()) return chat_template.status();
  auto tok = tokenizer::Tokenizer::Load(dir);
  if (!tok.ok()) return tok.status();
  return std::shared_ptr<const PromptCounter>(
      std::make_shared<TemplateTokenizerCounter>(std::move(*chat_template), std::move(*tok)));
}

absl::StatusOr<std::map<std::string, ModelEntry>> LoadModelCatalog(const std::string& path) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  auto root = json::Parse(*text);
  if (!root.ok()) return root.status();
  const Value* models = root->Find("models");
  if (models == nullptr || !models->is_array()) {
    return ReasonError("invalid_request", absl::StrCat(path, ": models: expected an array"));
  }
  std::string base = path.substr(0, path.find_last_of('/') == std::string::npos
                                        ? 0
                                        : path.find_last_of('/') + 1);
  std::map<std::string, ModelEntry> out;
  for (size_t i = 0; i < models->items().size(); ++i) {
    const Value& m = models->items()[i];
    std::string where = absl::StrCat(path, ": models[", i, "]");
    const Value* name = m.Find("name");
    const Value* dir = m.Find("tokenizer_dir");
    const Value* context = m.Find("context_length");
    if (name == nullptr || !name->is_string() || dir == nullptr || !dir->is_string() ||
        context == nullptr || !context->as_int64().has_value() || *context->as_int64() <= 0) {
      return ReasonError("invalid_request",
                         absl::StrCat(where, ": needs name, tokenizer_dir and context_length"));
    }
    ModelEntry entry;
    entry.name = name->as_string();
    entry.context_length = static_cast<uint32_t>(*context->as_int64());
    if (const Value* p = m.Find("tool_protocol"); p != nullptr && p->is_string()) {
      entry.tool_protocol = p->as_string();
    }
    if (const Value* d = m.Find("default_max_tokens"); d != nullptr && d->as_int64().has_value()) {
      entry.default_max_tokens = static_cast<uint32_t>(*d->as_int64());
    }
    std::string tokenizer_dir = dir->as_string();
    if (!tokenizer_dir.empty() && tokenizer_dir[0] != '/') tokenizer_dir = base + tokenizer_dir;
    auto counter = LoadPromptCounter(tokenizer_dir);
    if (!counter.ok()) {
      return Error(counter.status().code(), ReasonOf(counter.status()),
                   absl::StrCat(where, ": ", counter.status().message()));
    }
    entry.counter = *counter;
    out[entry.name] = std::move(entry);
  }
  return out;
}

}  // namespace gantry::router
