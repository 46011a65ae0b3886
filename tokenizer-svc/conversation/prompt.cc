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

absl::StatusOr<std::string> Render(const jinja::ChatTemplate& chat_template, const Value& conversation) {
  auto text = chat_template.Render(conversation);
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

absl::StatusOr<Prompt> BuildPrompt(const jinja::ChatTemplate& chat_template,
                                   const tokenizer::Tokenizer& tokenizer,
                                   const v1::InferenceRequest& request) {
  Value conversation = TemplateConversation(request);
  Prompt prompt;
  auto text = Render(chat_template, conversation);
  if (!text.ok()) return text.status();
  prompt.text = std::move(*text);

  tokenizer::EncodeOptions encode;
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
      auto marked = Render(chat_template, conversation);
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
  if (!ids.ok()) return ReasonError("invalid_request", ids.status().message());
  prompt.ids = std::move(*ids);
  return prompt;
}

}  // namespace gantry::conversation
