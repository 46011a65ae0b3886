#include "tokenizer-svc/tokenizer/added_tokens.h"

#include <algorithm>

#include <unicode/uchar.h>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "common/utf8.h"
#include "tokenizer-svc/tokenizer/json_fields.h"

namespace gantry::tokenizer {
namespace {

// The code point ending just before `pos` and its start, or false at the beginning.
bool PreviousChar(absl::string_view text, size_t pos, uint32_t* cp, size_t* start) {
  if (pos == 0) return false;
  size_t s = pos - 1;
  while (s > 0 && (static_cast<unsigned char>(text[s]) & 0xC0) == 0x80 && pos - s < 4) --s;
  if (Utf8SequenceLength(text, s, cp) != pos - s) return false;
  *start = s;
  return true;
}

bool NextChar(absl::string_view text, size_t pos, uint32_t* cp, size_t* length) {
  if (pos >= text.size()) return false;
  *length = Utf8SequenceLength(text, pos, cp);
  return *length != 0;
}

bool IsWordChar(uint32_t cp) { return cp == '_' || u_isalnum(static_cast<UChar32>(cp)); }

}  // namespace

void AddedVocabulary::Trie::Insert(absl::string_view key, int32_t token_index) {
  if (terminal.empty()) terminal.push_back(-1);
  if (key.empty()) return;  // an empty token can never be matched
  int32_t node = 0;
  for (char c : key) {
    uint64_t edge = (static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(c);
    auto it = edges.find(edge);
    if (it == edges.end()) {
      int32_t child = static_cast<int32_t>(terminal.size());
      terminal.push_back(-1);
      it = edges.emplace(edge, child).first;
    }
    node = it->second;
  }
  first_byte[static_cast<uint8_t>(key[0])] = true;
  if (terminal[node] < 0) terminal[node] = token_index;  // the first entry wins
}

absl::StatusOr<AddedVocabulary> AddedVocabulary::FromJson(const json::Value* v,
                                                          const Normalizer* normalizer,
                                                          int64_t id_limit) {
  AddedVocabulary added;
  added.raw_trie_.terminal.push_back(-1);
  added.normalized_trie_.terminal.push_back(-1);
  if (v == nullptr || v->is_null()) return added;
  if (!v->is_array()) return JsonError("added_tokens", "expected an array");
  for (size_t i = 0; i < v->items().size(); ++i) {
    const json::Value& entry = v->items()[i];
    std::string where = absl::StrCat("added_tokens[", i, "]");
    if (!entry.is_object()) return JsonError(where, "expected an object");
    AddedToken token;
    GANTRY_ASSIGN_OR_RETURN(int64_t id, IntOr(entry, "id", -1, where));
    if (id < 0 || id >= id_limit) return JsonError(where, "missing or out-of-range \"id\"");
    token.id = static_cast<int32_t>(id);
    const json::Value* content = Member(entry, "content");
    if (content == nullptr || !content->is_string()) return JsonError(where, "missing \"content\"");
    token.content = content->as_string();
    GANTRY_ASSIGN_OR_RETURN(token.special, BoolOr(entry, "special", false, where));
    GANTRY_ASSIGN_OR_RETURN(token.lstrip, BoolOr(entry, "lstrip", false, where));
    GANTRY_ASSIGN_OR_RETURN(token.rstrip, BoolOr(entry, "rstrip", false, where));
    GANTRY_ASSIGN_OR_RETURN(token.single_word, BoolOr(entry, "single_word", false, where));
    GANTRY_ASSIGN_OR_RETURN(token.normalized, BoolOr(entry, "normalized", !token.special, where));
    int32_t index = static_cast<int32_t>(added.tokens_.size());
    if (token.normalized && normalizer != nullptr) {
      std::string key = token.content;
      GANTRY_RETURN_IF_ERROR(normalizer->Normalize(&key));
      added.normalized_trie_.Insert(key, index);
    } else if (token.normalized) {
      added.normalized_trie_.Insert(token.content, index);
    } else {
      added.raw_trie_.Insert(token.content, index);
    }
    added.by_id_[token.id] = index;
    added.tokens_.push_back(std::move(token));
  }
  return added;
}

const AddedToken* AddedVocabulary::Find(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

int32_t AddedVocabulary::FindContent(absl::string_view content) const {
  for (const AddedToken& token : tokens_) {
    if (token.content == content) return token.id;
  }
  return -1;
}

bool AddedVocabulary::Overlaps(const Ranges& ranges, size_t begin, size_t end) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), begin,
                             [](size_t b, const std::pair<size_t, size_t>& r) { return b < r.second; });
  return it != ranges.end() && it->first < end;
}

template <typename Visit>
void AddedVocabulary::Walk(const Trie& trie, absl::string_view text, size_t pos, Visit visit) {
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    auto it = trie.edges.find((static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(text[i]));
    if (it == trie.edges.end()) return;
    node = it->second;
    if (trie.terminal[node] >= 0) visit(trie.terminal[node], i + 1);
  }
}

int32_t AddedVocabulary::LongestMatch(const Trie& trie, absl::string_view text, size_t pos,
                                      bool split_special, const Ranges* literal,
                                      size_t* end) const {
  int32_t best = -1;
  Walk(trie, text, pos, [&](int32_t index, size_t match_end) {
    if (tokens_[index].special &&
        (split_special || (literal != nullptr && Overlaps(*literal, pos, match_end)))) {
      return;
    }
    best = index;
    *end = match_end;
  });
  return best;
}

void AddedVocabulary::FindSpecial(absl::string_view text, Ranges* out) const {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t best_end = 0;
    for (const Trie* trie : {&raw_trie_, &normalized_trie_}) {
      if (!trie->first_byte[static_cast<uint8_t>(text[pos])]) continue;
      Walk(*trie, text, pos, [&](int32_t index, size_t end) {
        if (tokens_[index].special && end > best_end) best_end = end;
      });
    }
    if (best_end > 0) {
      out->emplace_back(pos, best_end);
      pos = best_end;
    } else {
      ++pos;
    }
  }
}

void AddedVocabulary::Split(absl::string_view text, bool normalized_set, bool split_special,
                            std::vector<Segment>* out, const Ranges* literal) const {
  const Trie& trie = normalized_set ? normalized_trie_ : raw_trie_;
  size_t text_start = 0;  // start of the pending text segment
  size_t pos = 0;
  while (pos < text.size()) {
    if (!trie.first_byte[static_cast<uint8_t>(text[pos])]) {
      ++pos;
      continue;
    }
    size_t end = 0;
    int32_t index = LongestMatch(trie, text, pos, split_special, literal, &end);
    if (index < 0) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens_[index];
    uint32_t cp = 0;
    size_t start = 0, length = 0;
    if (token.single_word &&
        ((PreviousChar(text, pos, &cp, &start) && IsWordChar(cp)) ||
         (NextChar(text, end, &cp, &length) && IsWordChar(cp)))) {
      ++pos;
      continue;
    }
    size_t begin = pos;
    if (token.lstrip) {
      while (begin > text_start && PreviousChar(text, begin, &cp, &start) && u_isUWhiteSpace(cp)) {
        begin = start;
      }
    }
    if (token.rstrip) {
      while (NextChar(text, end, &cp, &length) && u_isUWhiteSpace(cp)) end += length;
    }
    if (begin > text_start) out->push_back(Segment{text_start, begin, -1});
    out->push_back(Segment{begin, end, token.id});
    text_start = pos = end;
  }
  if (text.size() > text_start) out->push_back(Segment{text_start, text.size(), -1});
}

}  // namespace gantry::tokenizer
