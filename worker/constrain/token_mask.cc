#include "worker/constrain/token_mask.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/error_codes.h"
#include "common/status.h"
#include "common/utf8.h"
#include "tokenizer-svc/tokenizer/tokenizer.h"

namespace gantry::constrain {

namespace {

// Code points of `bytes` when it is only plain text (JsonMatcher::PlainTextRoom):
// printable ASCII but '"' and '\\', and whole UTF-8 characters; 0 otherwise.
uint8_t PlainCodePoints(const std::string& bytes) {
  size_t cps = 0;
  for (size_t i = 0; i < bytes.size();) {
    const uint8_t b = static_cast<uint8_t>(bytes[i]);
    if (b < 0x80) {
      if (b < 0x20 || b == 0x7f || b == '"' || b == '\\') return 0;
      ++i;
    } else {
      const size_t n = Utf8SequenceLength(bytes, i);
      if (n == 0) return 0;
      i += n;
    }
    ++cps;
  }
  return static_cast<uint8_t>(std::min<size_t>(cps, 255));
}

}  // namespace

void Vocabulary::Trie::Build(const std::vector<std::string>& bytes, std::vector<int32_t> members) {
  // Sorted by their bytes: a trie's depth-first order, equal byte strings adjacent.
  std::sort(members.begin(), members.end(), [&](int32_t a, int32_t b) {
    return bytes[a] != bytes[b] ? bytes[a] < bytes[b] : a < b;
  });
  ids = members;
  std::vector<uint32_t> path;  // trie node at each depth of the previous token
  const std::string* previous = nullptr;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string& b = bytes[ids[i]];
    size_t common = 0;
    if (previous != nullptr) {
      while (common < previous->size() && common < b.size() && (*previous)[common] == b[common]) ++common;
    }
    path.resize(common);
    for (size_t d = common; d < b.size(); ++d) {
      path.push_back(static_cast<uint32_t>(nodes.size()));
      nodes.push_back({static_cast<uint8_t>(b[d]), static_cast<uint16_t>(d + 1), 0, 0, 0});
    }
    Node& last = nodes[path.back()];
    if (last.n_ids == 0) last.first_id = static_cast<uint32_t>(i);
    ++last.n_ids;
    max_depth = std::max(max_depth, static_cast<int>(b.size()));
    previous = &b;
  }
  // A node's subtree ends at the next node no deeper than it.
  std::vector<uint32_t> open;
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    while (!open.empty() && nodes[open.back()].depth >= nodes[i].depth) {
      nodes[open.back()].end = i;
      open.pop_back();
    }
    open.push_back(i);
  }
  for (uint32_t i : open) nodes[i].end = static_cast<uint32_t>(nodes.size());
}

void Vocabulary::Trie::Walk(const JsonMatcher& matcher, TokenBits* bits) const {
  std::vector<JsonMatcher> at(max_depth + 1, matcher);  // the matcher after each depth's byte
  for (uint32_t i = 0; i < nodes.size();) {
    const Node& node = nodes[i];
    JsonMatcher& here = at[node.depth];
    here = at[node.depth - 1];
    if (!here.Feed(node.byte)) {
      i = node.end;
      continue;
    }
    for (uint32_t k = 0; k < node.n_ids; ++k) {
      const int32_t id = ids[node.first_id + k];
      (*bits)[id / 64] |= uint64_t{1} << (id % 64);
    }
    ++i;
  }
}

Vocabulary::Vocabulary(std::vector<std::string> bytes, std::vector<bool> special)
    : bytes_(std::move(bytes)), special_(std::move(special)), plain_cps_(bytes_.size(), 0) {
  if (!special_.empty()) special_.resize(bytes_.size(), false);
  std::vector<int32_t> all, other;
  for (int32_t id = 0; id < size(); ++id) {
    if (bytes_[id].empty() || this->special(id)) continue;
    all.push_back(id);
    plain_cps_[id] = PlainCodePoints(bytes_[id]);
    if (plain_cps_[id] != 0) {
      plain_ids_.push_back(id);
    } else {
      other.push_back(id);
    }
  }
  all_.Build(bytes_, std::move(all));
  other_.Build(bytes_, std::move(other));
}

std::shared_ptr<const Vocabulary> Vocabulary::FromTokenizer(const tokenizer::Tokenizer& tokenizer) {
  const int32_t n = tokenizer.vocab_size();
  // A token's bytes after another token: decode "anchor, token" and drop the anchor's
  // part (SentencePiece decoders drop a leading space only at the start of a text).
  int32_t anchor = -1;
  for (const char* text : {"a", "x", "e"}) {
    auto id = tokenizer.TokenId(text);
    if (id && !tokenizer.IsSpecial(*id)) {
      anchor = *id;
      break;
    }
  }
  std::string anchor_bytes;
  if (anchor >= 0) {
    auto decoded = tokenizer.DecodeToBytes({anchor}, false);
    if (decoded.ok()) anchor_bytes = *decoded;
  }
  std::vector<std::string> bytes(n);
  std::vector<bool> special(n, false);
  for (int32_t id = 0; id < n; ++id) {
    if (!tokenizer.TokenText(id)) continue;
    special[id] = tokenizer.IsSpecial(id);
    if (anchor >= 0) {
      auto decoded = tokenizer.DecodeToBytes({anchor, id}, false);
      if (decoded.ok() && decoded->compare(0, anchor_bytes.size(), anchor_bytes) == 0) {
        bytes[id] = decoded->substr(anchor_bytes.size());
      }
    } else {
      auto decoded = tokenizer.DecodeToBytes({id}, false);
      if (decoded.ok()) bytes[id] = *decoded;
    }
  }
  return std::make_shared<const Vocabulary>(std::move(bytes), std::move(special));
}

void Vocabulary::AllowedBy(const JsonMatcher& matcher, TokenBits* bits) const {
  const uint64_t room = matcher.PlainTextRoom();
  if (room == 0) {
    all_.Walk(matcher, bits);
    return;
  }
  for (int32_t id : plain_ids_) {
    if (plain_cps_[id] <= room) (*bits)[id / 64] |= uint64_t{1} << (id % 64);
  }
  other_.Walk(matcher, bits);
}

const TokenBits& MaskCache::Get(const Vocabulary& vocabulary, uint64_t grammar_id, const JsonMatcher& matcher) {
  std::string key = absl::StrCat(grammar_id, "|", matcher.Key());
  auto it = entries_.find(key);
  if (it != entries_.end()) {
    ++hits_;
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return it->second.bits;
  }
  ++misses_;
  TokenBits bits((vocabulary.size() + 63) / 64, 0);
  vocabulary.AllowedBy(matcher, &bits);
  const size_t cost = bits.size() * sizeof(uint64_t) + key.size();
  while (!lru_.empty() && bytes_ + cost > max_bytes_) {
    auto victim = entries_.find(lru_.back());
    bytes_ -= victim->second.bits.size() * sizeof(uint64_t) + victim->first.size();
    entries_.erase(victim);
    lru_.pop_back();
  }
  lru_.push_front(key);
  bytes_ += cost;
  Entry& entry = entries_[std::move(key)];
  entry.bits = std::move(bits);
  entry.lru = lru_.begin();
  return entry.bits;
}

Constraint::Constraint(std::shared_ptr<const Vocabulary> vocabulary, std::shared_ptr<const JsonGrammar> grammar,
                       uint64_t grammar_id, MaskCache* cache, std::vector<int32_t> stop_ids, std::string trigger,
                       std::string suffix)
    : vocabulary_(std::move(vocabulary)),
      grammar_(std::move(grammar)),
      grammar_id_(grammar_id),
      cache_(cache),
      stop_ids_(std::move(stop_ids)),
      trigger_(std::move(trigger)),
      suffix_(std::move(suffix)),
      active_(trigger_.empty()),
      matcher_(grammar_, suffix_) {}

const TokenBits* Constraint::Allowed() {
  if (!active_) return nullptr;
  const TokenBits& cached = cache_->Get(*vocabulary_, grammar_id_, matcher_);
  if (!matcher_.Complete()) return &cached;  // valid until the cache's next Get
  allowed_ = cached;  // the stop tokens are added to a copy, never to the cached mask
  for (int32_t id : stop_ids_) {
    if (id >= 0 && id < vocabulary_->size()) allowed_[id / 64] |= uint64_t{1} << (id % 64);
  }
  return &allowed_;
}

absl::Status Constraint::Accept(int32_t token) {
  if (token < 0 || token >= vocabulary_->size()) {
    return ReasonError("invalid_output", absl::StrCat("token ", token, " is outside the vocabulary"));
  }
  const std::string& bytes = vocabulary_->bytes(token);
  if (!active_) {
    tail_ += bytes;
    const size_t at = tail_.find(trigger_);
    if (at == std::string::npos) {
      if (tail_.size() > trigger_.size()) tail_.erase(0, tail_.size() - trigger_.size());
      return absl::OkStatus();
    }
    active_ = true;
    const std::string rest = tail_.substr(at + trigger_.size());
    tail_.clear();
    if (!matcher_.Feed(rest)) {
      return ReasonError("invalid_output", "the output after the constraint's start does not fit its grammar");
    }
    Ended();
    return absl::OkStatus();
  }
  if (std::find(stop_ids_.begin(), stop_ids_.end(), token) != stop_ids_.end() && matcher_.Complete()) {
    return absl::OkStatus();
  }
  if (bytes.empty() || vocabulary_->special(token) || !matcher_.Feed(bytes)) {
    return ReasonError("invalid_output", absl::StrCat("token ", token, " does not fit the constrained output"));
  }
  Ended();
  return absl::OkStatus();
}

void Constraint::Ended() {
  if (suffix_.empty() || !matcher_.Complete()) return;
  // The call's envelope is closed: free text until the next trigger.
  ++completed_;
  active_ = false;
  matcher_ = JsonMatcher(grammar_, suffix_);
}

}  // namespace gantry::constrain
