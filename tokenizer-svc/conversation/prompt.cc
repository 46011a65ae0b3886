#include "tokenizer-svc/conversation/prompt.h"

#include <map>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/error_codes.h"
#include "common/json.h"
#include "common/status.h"
#include "tokenizer-svc/conversation/conversation.h"
#include "tokenizer-svc/jinja/value.h"

namespace gantry::conversation {
namespace {

using json::Value;

// Marker for the i-th special-token text taken out of client strings: U+FDD0, the
// decimal index, U+FDD1. Noncharacters: valid UTF-8 that no template writes and no
// tokenizer normalizes away.
constexpr char kOpen[] = "\xEF\xB7\x90";
constexpr char kClose[] = "\xEF\xB7\x91";
constexpr size_t kMarkBytes = 3;  // each of them
// More special-token texts than this in one request is refused: no conversation needs
// it, and each costs a literal range in the worker and the router.
constexpr size_t kMaxSpecialTextOccurrences = 65536;

class Marker {
 public:
  explicit Marker(const tokenizer::Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

  // Replaces special-token text in every string (and object key) of `v`.
  void Mark(Value* v) {
    switch (v->type()) {
      case json::Type::kString:
        if (auto marked = MarkString(v->as_string())) *v = Value::String(std::move(*marked));
        return;
      case json::Type::kArray:
        for (Value& item : v->items()) Mark(&item);
        return;
      case json::Type::kObject:
        for (auto& [key, value] : v->members()) {
          if (auto marked = MarkString(key)) key = std::move(*marked);
          Mark(&value);
        }
        return;
      default:
        return;
    }
  }

  // The distinct special-token texts taken out; a marker's index points here.
  const std::vector<std::string>& texts() const { return texts_; }
  size_t occurrences() const { return occurrences_; }
  // A client string already held a marker character: markers would be ambiguous.
  bool conflict() const { return conflict_; }

 private:
  absl::optional<std::string> MarkString(const std::string& s) {
    if (s.find(kOpen) != std::string::npos || s.find(kClose) != std::string::npos) conflict_ = true;
    auto ranges = tokenizer_.FindSpecialText(s);
    if (ranges.empty()) return absl::nullopt;
    std::string out;
    size_t done = 0;
    for (const auto& [begin, end] : ranges) {
      out.append(s, done, begin - done);
      std::string text = s.substr(begin, end - begin);
      auto [it, added] = index_.emplace(text, texts_.size());
      if (added) texts_.push_back(std::move(text));
      absl::StrAppend(&out, kOpen, it->second, kClose);
      ++occurrences_;
      done = end;
    }
    out.append(s, done, std::string::npos);
    return out;
  }

  const tokenizer::Tokenizer& tokenizer_;
  std::vector<std::string> texts_;
  std::map<std::string, size_t> index_;  // text -> its index in texts_
  size_t occurrences_ = 0;
  bool conflict_ = false;
};

}  // namespace

struct ToolsCache::Entry {
  // FromJson(TemplateTools(tools)).
  jinja::Value tools;
  // json::Dump(*ToJson(x)) for x the list, each tool and each tool's function.
  jinja::ToJsonMemo tojson;
  // No string or key of the tools holds special-token text or a marker character: the
  // marked conversation's tools are the tools themselves.
  bool clean = false;
};

namespace {

// `tools`: rendered (the request's tools, converted) in place of conversation["tools"];
// null to render the conversation as it is.
absl::StatusOr<std::string> Render(const jinja::ChatTemplate& chat_template, const Value& conversation,
                                   const ToolsCache::Entry* tools) {
  absl::StatusOr<std::string> text;
  if (tools == nullptr) {
    text = chat_template.Render(conversation);
  } else {
    jinja::RenderOptions options;
    options.tojson_memo = &tools->tojson;
    text = chat_template.RenderWithTools(conversation, tools->tools, options);
  }
  if (!text.ok() && ReasonOf(text.status()).empty()) {
    return ReasonError("template_render_failed", text.status().message());
  }
  return text;
}

// Puts the marked texts back into `marked`, recording where each landed. False when a
// marker was cut or altered by the template.
bool Unmark(absl::string_view marked, const std::vector<std::string>& texts, std::string* out,
            std::vector<std::pair<size_t, size_t>>* ranges) {
  size_t pos = 0;
  while (pos < marked.size()) {
    size_t open = marked.find(kOpen, pos);
    size_t close_stray = marked.find(kClose, pos);
    if (open == absl::string_view::npos) {
      if (close_stray != absl::string_view::npos) return false;
      out->append(marked.data() + pos, marked.size() - pos);
      break;
    }
    if (close_stray < open) return false;
    out->append(marked.data() + pos, open - pos);
    size_t digits = open + kMarkBytes;
    size_t close = marked.find(kClose, digits);
    if (close == absl::string_view::npos) return false;
    uint32_t index = 0;
    if (!absl::SimpleAtoi(marked.substr(digits, close - digits), &index) || index >= texts.size()) {
      return false;
    }
    ranges->emplace_back(out->size(), out->size() + texts[index].size());
    out->append(texts[index]);
    pos = close + kMarkBytes;
  }
  return true;
}

}  // namespace

ToolsCache::ToolsCache(size_t max_entries, size_t max_bytes) : lru_(max_entries, max_bytes) {}
ToolsCache::~ToolsCache() = default;

std::shared_ptr<const ToolsCache::Entry> ToolsCache::Get(
    const jinja::ChatTemplate& chat_template, const tokenizer::Tokenizer& tokenizer,
    const google::protobuf::RepeatedPtrField<v1::ToolDefinition>& tools) {
  // Every input of the entry: the pair's identities, then each field TemplateTools
  // reads, length-prefixed so that no two tool lists share a key.
  std::string key;
  size_t size = 2 * sizeof(void*);
  for (const v1::ToolDefinition& tool : tools) {
    size += 3 * sizeof(uint64_t) + tool.name().size() + tool.description().size() +
            tool.parameters_json().size();
  }
  key.reserve(size);
  auto append_raw = [&key](const void* p, size_t n) { key.append(static_cast<const char*>(p), n); };
  const void* pair[2] = {&chat_template, &tokenizer};
  append_raw(pair, sizeof(pair));
  for (const v1::ToolDefinition& tool : tools) {
    for (const std::string* field : {&tool.name(), &tool.description(), &tool.parameters_json()}) {
      const uint64_t n = field->size();
      append_raw(&n, sizeof(n));
      key.append(*field);
    }
  }
  if (std::shared_ptr<const Entry> hit = lru_.Find(key)) return hit;

  auto entry = std::make_shared<Entry>();
  Value json_tools = TemplateTools(tools);
  {
    Marker marker(tokenizer);
    Value marked = json_tools;
    marker.Mark(&marked);
    entry->clean = marker.occurrences() == 0 && !marker.conflict();
  }
  entry->tools = jinja::FromJson(json_tools);
  size_t bytes = key.size();
  auto memo = [&](const jinja::Value& v) {
    auto j = jinja::ToJson(v);
    if (!j.ok()) return;  // not reached: FromJson values always convert back
    std::string text = json::Dump(*j);
    bytes += 3 * text.size() + 64;  // the text, and about as much again for the value
    entry->tojson.emplace(v.identity(), std::move(text));
  };
  memo(entry->tools);
  for (const jinja::Value& tool : entry->tools.list()) {
    memo(tool);
    if (!tool.is_dict()) continue;
    if (const jinja::Value* function = tool.dict().Find("function"); function && function->is_dict()) {
      memo(*function);
    }
  }
  std::shared_ptr<const Entry> out = entry;
  lru_.Insert(std::move(key), out, bytes);
  return out;
}

absl::StatusOr<Prompt> BuildPrompt(const jinja::ChatTemplate& chat_template,
                                   const tokenizer::Tokenizer& tokenizer,
                                   const v1::InferenceRequest& request, ToolsCache* tools_cache,
                                   size_t max_ids) {
  // With a cache, the tools are rendered from their kept conversion, unless they need
  // markers (special-token text in them, and it is not allowed): then, as without one,
  // from the conversation.
  // A conversation whose text cannot fit is refused before it is rendered (found by a
  // red team: 16 MiB of short words rendered and split cost 740 MB and 1.6 s before the
  // count stopped). The messages' text is a lower bound of the prompt's, but for the
  // assistant's: templates may drop parts of earlier answers (Qwen3's reasoning).
  if (max_ids != 0) {
    size_t bytes = 0;
    for (const v1::ChatMessage& m : request.messages()) {
      if (m.role() != "assistant") bytes += m.content().size();
    }
    if (tokenizer.MinIdsFor(bytes) > max_ids) {
      return absl::OutOfRangeError(absl::StrCat("the text has more than ", max_ids, " tokens"));
    }
  }
  std::shared_ptr<const ToolsCache::Entry> tools;
  if (tools_cache != nullptr && request.tools_size() > 0) {
    tools = tools_cache->Get(chat_template, tokenizer, request.tools());
    if (!tools->clean && !request.special_tokens_in_content()) tools = nullptr;
  }
  Value conversation =
      tools != nullptr ? TemplateConversationWithoutTools(request) : TemplateConversation(request);
  auto render = [&](const Value& c) { return Render(chat_template, c, tools.get()); };
  Prompt prompt;
  auto text = render(conversation);
  if (!text.ok()) return text.status();
  prompt.text = std::move(*text);

  tokenizer::EncodeOptions encode;
  encode.max_ids = max_ids;
  if (!request.special_tokens_in_content()) {
    if (tokenizer.HasNormalizedSpecialTokens()) {
      // Client text could form such a token only after normalization, where byte
      // ranges no longer hold: refuse rather than risk it (no known tokenizer has one).
      return absl::FailedPreconditionError(
          "this tokenizer has special tokens matched after normalization; client text "
          "cannot be kept from forming them (only principals with "
          "special_tokens_in_content may use it)");
    }
    Marker marker(tokenizer);
    marker.Mark(&conversation);
    if (marker.occurrences() > kMaxSpecialTextOccurrences) {
      return ReasonError("invalid_request",
                         absl::StrCat("the messages spell special tokens ", marker.occurrences(),
                                      " times (at most ", kMaxSpecialTextOccurrences, ")"));
    }
    if (!marker.texts().empty()) {
      if (marker.conflict()) {
        return ReasonError("invalid_request",
                           "the messages hold special-token text and the noncharacters "
                           "U+FDD0/U+FDD1; remove one or the other");
      }
      auto marked = render(conversation);
      if (!marked.ok()) return marked.status();
      std::string restored;
      if (!Unmark(*marked, marker.texts(), &restored, &encode.literal_ranges) ||
          restored != prompt.text) {
        return ReasonError("invalid_request",
                           "the chat template transforms message text that holds special-token "
                           "text; the prompt cannot be tokenized safely");
      }
      prompt.literal_special_spans = static_cast<int>(encode.literal_ranges.size());
    }
  }
  auto ids = tokenizer.Encode(prompt.text, encode);
  if (absl::IsOutOfRange(ids.status())) return ids.status();
  if (!ids.ok()) return ReasonError("invalid_request", ids.status().message());
  prompt.ids = std::move(*ids);
  return prompt;
}

}  // namespace gantry::conversation
