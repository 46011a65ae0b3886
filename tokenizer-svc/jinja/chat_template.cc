#include "tokenizer-svc/jinja/chat_template.h"

#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "common/error_codes.h"
#include "common/file.h"
#include "common/status.h"

namespace gantry::jinja {
namespace {

constexpr size_t kMaxConfigBytes = 64u << 20;

const char* const kSpecialKeys[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                    "pad_token", "cls_token", "mask_token"};

// A token as HF stores it: "text" or {"content": "text", ...} (AddedToken).
const json::Value* TokenString(const json::Value& v) {
  if (v.is_string()) return &v;
  if (v.is_object()) {
    const json::Value* content = v.Find("content");
    if (content != nullptr && content->is_string()) return content;
  }
  return nullptr;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  return ReadFileToString(path, kMaxConfigBytes);
}

}  // namespace

absl::StatusOr<ChatTemplate> ChatTemplate::Load(const std::string& path) {
  std::string file = path;
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) file = path + "/tokenizer_config.json";
  GANTRY_ASSIGN_OR_RETURN(std::string text, ReadFile(file));
  absl::StatusOr<json::Value> config = json::Parse(text);
  if (!config.ok()) {
    return Error(config.status().code(), ReasonOf(config.status()),
                 absl::StrCat(file, ": ", config.status().message()));
  }
  return FromConfig(*config);
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromConfig(const json::Value& config) {
  const json::Value* tpl = config.Find("chat_template");
  const json::Value* source = nullptr;
  if (tpl != nullptr && tpl->is_string()) {
    source = tpl;
  } else if (tpl != nullptr && tpl->is_array()) {
    for (const json::Value& entry : tpl->items()) {
      const json::Value* name = entry.Find("name");
      const json::Value* text = entry.Find("template");
      if (name && name->is_string() && name->as_string() == "default" && text && text->is_string()) {
        source = text;
      }
    }
  }
  if (source == nullptr) {
    return absl::FailedPreconditionError("tokenizer_config.json has no chat_template (string or \"default\")");
  }
  json::Value specials = json::Value::EmptyObject();
  for (const char* key : kSpecialKeys) {
    const json::Value* v = config.Find(key);
    if (v == nullptr) continue;
    if (const json::Value* s = TokenString(*v)) specials.Set(key, *s);
  }
  const json::Value* extra = config.Find("additional_special_tokens");
  if (extra != nullptr && extra->is_array()) {
    json::Value list = json::Value::EmptyArray();
    for (const json::Value& t : extra->items()) {
      const json::Value* s = TokenString(t);
      list.Append(s ? *s : json::Value());
    }
    specials.Set("additional_special_tokens", std::move(list));
  }
  return FromSource(source->as_string(), specials);
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromSource(absl::string_view source,
                                                      const json::Value& special_tokens) {
  ChatTemplate t;
  t.source_ = std::string(source);
  GANTRY_ASSIGN_OR_RETURN(t.template_, Template::Parse(source));
  for (const auto& m : special_tokens.members()) t.specials_.Set(m.first, FromJson(m.second));
  return t;
}

absl::StatusOr<std::string> ChatTemplate::Render(const json::Value& conversation,
                                                 const RenderOptions& options) const {
  return RenderImpl(conversation, nullptr, options);
}

absl::StatusOr<std::string> ChatTemplate::RenderWithTools(const json::Value& conversation,
                                                          const Value& tools,
                                                          const RenderOptions& options) const {
  return RenderImpl(conversation, &tools, options);
}

absl::StatusOr<std::string> ChatTemplate::RenderImpl(const json::Value& conversation,
                                                     const Value* tools,
                                                     const RenderOptions& options) const {
  if (!conversation.is_object()) {
    return ReasonError("invalid_request", "the conversation must be a JSON object");
  }
  const json::Value* messages = conversation.Find("messages");
  if (messages == nullptr || !messages->is_array()) {
    return ReasonError("invalid_request", "the conversation needs a \"messages\" list");
  }
  // HF's order: special tokens, the other keys, kwargs, then the fixed four.
  DictData context = specials_;
  const json::Value* kwargs = nullptr;
  for (const auto& m : conversation.members()) {
    const std::string& key = m.first;
    if (key == "messages" || key == "tools" || key == "documents" ||
        key == "add_generation_prompt" || key == "description" || key == "$comment") {
      continue;
    }
    if (key == "kwargs") {
      kwargs = &m.second;
      continue;
    }
    context.Set(key, FromJson(m.second));
  }
  if (kwargs != nullptr) {
    if (!kwargs->is_object()) return ReasonError("invalid_request", "\"kwargs\" must be an object");
    for (const auto& m : kwargs->members()) context.Set(m.first, FromJson(m.second));
  }
  auto field = [&](const char* key, json::Value dflt) {
    const json::Value* v = conversation.Find(key);
    return FromJson(v ? *v : dflt);
  };
  context.Set("messages", FromJson(*messages));
  context.Set("tools", tools != nullptr ? *tools : field("tools", json::Value()));
  context.Set("documents", field("documents", json::Value()));
  context.Set("add_generation_prompt", field("add_generation_prompt", json::Value::Bool(false)));
  return template_->Render(context, options);
}

}  // namespace gantry::jinja
