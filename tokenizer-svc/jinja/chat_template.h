// A model's chat template, rendered the way Hugging Face transformers'
// apply_chat_template renders it: the contract the router and the worker use to turn a
// conversation into the exact prompt text.
//
// Load() reads tokenizer_config.json (a path to the file, or a directory holding it):
// "chat_template" (a string, or a list of {name, template} from which "default" is
// taken) and the special tokens HF passes to the template (bos_token, eos_token,
// unk_token, sep_token, pad_token, cls_token, mask_token: a string or an AddedToken
// {"content": ...}; additional_special_tokens as a list).
//
// Render() takes a conversation object as HF's apply_chat_template(**kwargs) does:
//   messages (required), tools (default None), documents (default None),
//   add_generation_prompt (default false), kwargs (an object merged into the
//   variables), "description" and "$comment" ignored, every other key a template
//   variable (enable_thinking, ...). JSON numbers keep their kind: 1.0 renders and
//   tojson-dumps as 1.0.
// A failed render is an error, never a fallback format.
//
// Errors: Load: NOT_FOUND (no file), INVALID_ARGUMENT reason invalid_json (bad JSON),
// FAILED_PRECONDITION (no chat_template), INVALID_ARGUMENT reason
// template_render_failed (a syntax error, "line N: what"). Render: INVALID_ARGUMENT
// reason invalid_request (no messages list), reason template_render_failed ("line N:
// message", also for raise_exception(message) and for exceeded limits).
//
// Thread-safety: a ChatTemplate is immutable; Render() may run on several threads.
#ifndef GANTRY_TOKENIZER_SVC_JINJA_CHAT_TEMPLATE_H_
#define GANTRY_TOKENIZER_SVC_JINJA_CHAT_TEMPLATE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/json.h"
#include "tokenizer-svc/jinja/runtime/interpreter.h"
#include "tokenizer-svc/jinja/value.h"

namespace gantry::jinja {

class ChatTemplate {
 public:
  // `path`: tokenizer_config.json, or a directory that holds it.
  static absl::StatusOr<ChatTemplate> Load(const std::string& path);
  // From a parsed tokenizer_config.json.
  static absl::StatusOr<ChatTemplate> FromConfig(const json::Value& config);
  // From template text and the special-token variables (e.g. {"bos_token": "<s>"}).
  static absl::StatusOr<ChatTemplate> FromSource(absl::string_view source,
                                                 const json::Value& special_tokens);

  absl::StatusOr<std::string> Render(const json::Value& conversation,
                                     const RenderOptions& options = {}) const;

  // As Render(), with `tools` as the template's `tools` variable instead of
  // FromJson(conversation["tools"]) (a "tools" member of `conversation` is ignored): the
  // same text as Render() of the conversation holding those tools, for a caller that
  // keeps its tool definitions converted from one render to the next (with their
  // tojson texts in options.tojson_memo). `tools` holds no namespace (FromJson makes
  // none), so one such value may serve renders on several threads at once.
  absl::StatusOr<std::string> RenderWithTools(const json::Value& conversation, const Value& tools,
                                              const RenderOptions& options = {}) const;

  const std::string& source() const { return source_; }

 private:
  ChatTemplate() = default;
  // `tools`: null to convert conversation["tools"].
  absl::StatusOr<std::string> RenderImpl(const json::Value& conversation, const Value* tools,
                                         const RenderOptions& options) const;

  std::string source_;
  std::shared_ptr<const Template> template_;
  DictData specials_;  // the special-token variables, in HF's order
};

}  // namespace gantry::jinja

#endif  // GANTRY_TOKENIZER_SVC_JINJA_CHAT_TEMPLATE_H_
