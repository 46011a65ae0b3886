#include "tokenizer-svc/tokenizer/model_bpe.h"

#include <cstdio>
#include <functional>
#include <queue>
#include <utility>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "common/utf8.h"
#include "tokenizer-svc/tokenizer/byte_level.h"
#include "tokenizer-svc/tokenizer/json_fields.h"

namespace gantry::tokenizer {
namespace {

uint64_t PairKey(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  bool removed;
};

struct Candidate {
  int32_t rank;
  int32_t pos;
  int32_t new_id;
  // std::priority_queue is a max-heap: "greater" means popped later.
  bool operator<(const Candidate& o) const {
    return rank != o.rank ? rank > o.rank : pos > o.pos;
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<BpeModel>> BpeModel::FromJson(const json::Value& model,
                                                             bool byte_level) {
  constexpr absl::string_view kWhere = "model";
  if (!model.is_object()) return JsonError(kWhere, "expected an object");
  GANTRY_ASSIGN_OR_RETURN(std::string type, StringOr(model, "type", "BPE", kWhere));
  if (type != "BPE") {
    return absl::UnimplementedError(absl::StrCat("tokenizer.json: model type '", type,
                                                 "' is not supported (only BPE)"));
  }
  if (const json::Value* dropout = Member(model, "dropout");
      dropout != nullptr && !dropout->is_null() &&
      !(dropout->is_number() && dropout->as_double() == 0)) {
    return absl::UnimplementedError("tokenizer.json: model.dropout is not supported");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    GANTRY_ASSIGN_OR_RETURN(std::string affix, StringOr(model, key, "", kWhere));
    if (!affix.empty()) {
      return absl::UnimplementedError(absl::StrCat("tokenizer.json: model.", key, " is not supported"));
    }
  }

  std::unique_ptr<BpeModel> bpe(new BpeModel());
  bpe->byte_level_ = byte_level;
  GANTRY_ASSIGN_OR_RETURN(bpe->byte_fallback_, BoolOr(model, "byte_fallback", false, kWhere));
  GANTRY_ASSIGN_OR_RETURN(bpe->fuse_unk_, BoolOr(model, "fuse_unk", false, kWhere));
  GANTRY_ASSIGN_OR_RETURN(bpe->ignore_merges_, BoolOr(model, "ignore_merges", false, kWhere));

  const json::Value* vocab = Member(model, "vocab");
  if (vocab == nullptr || !vocab->is_object()) return JsonError("model.vocab", "expected an object");
  // Ids are dense in real files; bound them so that a hostile file cannot make us
  // allocate gigabytes for a table of a few entries.
  const int64_t id_limit = 4 * static_cast<int64_t>(vocab->members().size()) + 1024;
  bpe->vocab_.reserve(vocab->members().size());
  for (const auto& [token, id_value] : vocab->members()) {
    auto id = id_value.as_int64();
    if (!id_value.is_integer() || !id.has_value() || *id < 0 || *id >= id_limit) {
      return JsonError("model.vocab", absl::StrCat("token '", token, "' has an invalid id"));
    }
    bpe->vocab_[token] = static_cast<int32_t>(*id);
    if (*id >= static_cast<int64_t>(bpe->id_to_token_.size())) {
      bpe->id_to_token_.resize(*id + 1);
      bpe->id_used_.resize(*id + 1, false);
    }
    bpe->id_to_token_[*id] = token;
    bpe->id_used_[*id] = true;
  }

  GANTRY_ASSIGN_OR_RETURN(std::string unk, StringOr(model, "unk_token", "", kWhere));
  if (!unk.empty()) {
    auto it = bpe->vocab_.find(unk);
    if (it == bpe->vocab_.end()) {
      return JsonError("model.unk_token", absl::StrCat("'", unk, "' is not in the vocabulary"));
    }
    bpe->unk_id_ = it->second;
  }

  bpe->byte_ids_.fill(-1);
  if (byte_level) {
    std::string text;
    for (int b = 0; b < 256; ++b) {
      text.clear();
      AppendUtf8(ByteLevelCodePoint(static_cast<uint8_t>(b)), &text);
      auto it = bpe->vocab_.find(text);
      if (it != bpe->vocab_.end()) bpe->byte_ids_[b] = it->second;
    }
    bpe->raw_vocab_.reserve(bpe->vocab_.size());
    std::string raw;
    for (const auto& [token, id] : bpe->vocab_) {
      raw.clear();
      if (AppendByteLevelBytes(token, &raw)) bpe->raw_vocab_.emplace(raw, id);
    }
  } else if (bpe->byte_fallback_) {
    char name[8];
    for (int b = 0; b < 256; ++b) {
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      auto it = bpe->vocab_.find(name);
      if (it != bpe->vocab_.end()) bpe->byte_ids_[b] = it->second;
    }
  }

  const json::Value* merges = Member(model, "merges");
  if (merges != nullptr && !merges->is_null()) {
    if (!merges->is_array()) return JsonError("model.merges", "expected an array");
    bpe->merges_.reserve(merges->items().size());
    int32_t rank = 0;
    for (const json::Value& merge : merges->items()) {
      absl::string_view left, right;
      if (merge.is_string()) {
        absl::string_view s = merge.as_string();
        size_t space = s.find(' ');
        if (space == absl::string_view::npos || s.find(' ', space + 1) != absl::string_view::npos) {
          return JsonError("model.merges", absl::StrCat("merge '", s, "' is not two tokens"));
        }
        left = s.substr(0, space);
        right = s.substr(space + 1);
      } else if (merge.is_array() && merge.items().size() == 2 && merge.items()[0].is_string() &&
                 merge.items()[1].is_string()) {
        left = merge.items()[0].as_string();
        right = merge.items()[1].as_string();
      } else {
        return JsonError("model.merges", "each merge must be \"a b\" or [\"a\", \"b\"]");
      }
      auto l = bpe->vocab_.find(left);
      auto r = bpe->vocab_.find(right);
      auto m = bpe->vocab_.find(absl::StrCat(left, right));
      if (l == bpe->vocab_.end() || r == bpe->vocab_.end() || m == bpe->vocab_.end()) {
        return JsonError("model.merges",
                         absl::StrCat("merge '", left, " ", right, "' uses a token not in the vocabulary"));
      }
      // The first (lowest) rank wins when a pair is listed twice.
      bpe->merges_.emplace(PairKey(l->second, r->second), Merge{rank, m->second});
      ++rank;
    }
  }
  bpe->max_bytes_per_token_ = bpe->BoundBytesPerToken();
  return bpe;
}

size_t BpeModel::BoundBytesPerToken() const {
  // Every initial symbol stands for one byte (byte-level, byte fallback) or one
  // character (at most 4 bytes; the unknown token for one, unfused), and a merged
  // token for the bytes of its text, raw bytes in byte-level mode.
  bool every_byte = true;
  for (int32_t id : byte_ids_) every_byte = every_byte && id >= 0;
  const bool unknowns_counted = unk_id_ >= 0 && !fuse_unk_;
  if (byte_level_ ? !(every_byte || unknowns_counted)
                  : !((byte_fallback_ && every_byte) || unknowns_counted)) {
    return 0;
  }
  // (A token's text is never shorter than what it stands for: a byte-level character
  // is at least one byte, "<0x41>" and "<unk>" longer than theirs.)
  size_t longest = 4;
  std::string raw;
  for (const auto& [token, id] : vocab_) {
    raw.clear();
    const bool decoded = byte_level_ && AppendByteLevelBytes(token, &raw);
    longest = std::max(longest, decoded ? raw.size() : token.size());
  }
  return longest;
}

const std::string* BpeModel::TokenText(int32_t id) const {
  if (id < 0 || id >= id_end() || !id_used_[id]) return nullptr;
  return &id_to_token_[id];
}

absl::optional<int32_t> BpeModel::TokenId(absl::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return absl::nullopt;
  return it->second;
}

const BpeModel::Merge* BpeModel::FindMerge(int32_t left, int32_t right) const {
  auto it = merges_.find(PairKey(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeModel::Encode(absl::string_view piece, std::vector<int32_t>* ids) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    const auto& whole_vocab = byte_level_ ? raw_vocab_ : vocab_;
    auto it = whole_vocab.find(piece);
    if (it != whole_vocab.end()) {
      ids->push_back(it->second);
      return;
    }
  }
  if (piece.size() > kMaxCachedPieceBytes) {
    EncodeUncached(piece, ids);
    return;
  }
  CacheShard& shard = cache_[absl::Hash<absl::string_view>()(piece) % kCacheShards];
  {
    std::lock_guard<std::mutex> lock(shard.mu);
    auto it = shard.map.find(piece);
    if (it != shard.map.end()) {
      ids->insert(ids->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  size_t start = ids->size();
  EncodeUncached(piece, ids);
  std::lock_guard<std::mutex> lock(shard.mu);
  if (shard.map.size() >= kCacheEntriesPerShard) shard.map.clear();
  shard.map.emplace(std::string(piece), std::vector<int32_t>(ids->begin() + start, ids->end()));
}

void BpeModel::EncodeUncached(absl::string_view piece, std::vector<int32_t>* ids) const {
  std::vector<Symbol> symbols;
  symbols.reserve(piece.size());
  auto push = [&symbols](int32_t id) {
    int32_t n = static_cast<int32_t>(symbols.size());
    symbols.push_back(Symbol{id, n - 1, n + 1, false});
  };
  bool last_unk = false;
  auto push_unk = [&]() {
    if (unk_id_ < 0) return;  // no unknown token: the character is dropped (HF)
    if (fuse_unk_ && last_unk) return;
    push(unk_id_);
    last_unk = true;
  };
  if (byte_level_) {
    for (char c : piece) {
      int32_t id = byte_ids_[static_cast<uint8_t>(c)];
      if (id >= 0) {
        push(id);
        last_unk = false;
      } else {
        push_unk();
      }
    }
  } else {
    for (size_t i = 0; i < piece.size();) {
      size_t n = Utf8SequenceLength(piece, i);
      if (n == 0) n = 1;  // not reached for valid UTF-8; keeps us moving on bad input
      absl::string_view ch = piece.substr(i, n);
      auto it = vocab_.find(ch);
      if (it != vocab_.end()) {
        push(it->second);
        last_unk = false;
      } else {
        bool all_bytes = byte_fallback_;
        for (size_t k = 0; all_bytes && k < n; ++k) all_bytes = byte_ids_[static_cast<uint8_t>(ch[k])] >= 0;
        if (all_bytes) {
          for (size_t k = 0; k < n; ++k) push(byte_ids_[static_cast<uint8_t>(ch[k])]);
          last_unk = false;
        } else {
          push_unk();
        }
      }
      i += n;
    }
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;
  const int32_t count = static_cast<int32_t>(symbols.size());

  if (count > 1 && !merges_.empty()) {
    std::vector<Candidate> storage;
    storage.reserve(count);
    std::priority_queue<Candidate> queue(std::less<Candidate>(), std::move(storage));
    for (int32_t i = 0; i + 1 < count; ++i) {
      if (const Merge* m = FindMerge(symbols[i].id, symbols[i + 1].id)) {
        queue.push(Candidate{m->rank, i, m->new_id});
      }
    }
    while (!queue.empty()) {
      Candidate top = queue.top();
      queue.pop();
      Symbol& left = symbols[top.pos];
      if (left.removed || left.next < 0) continue;
      Symbol& right = symbols[left.next];
      const Merge* m = FindMerge(left.id, right.id);
      if (m == nullptr || m->new_id != top.new_id) continue;  // stale candidate
      left.id = top.new_id;
      right.removed = true;
      left.next = right.next;
      if (left.next >= 0) symbols[left.next].prev = top.pos;
      if (left.prev >= 0) {
        if (const Merge* pm = FindMerge(symbols[left.prev].id, left.id)) {
          queue.push(Candidate{pm->rank, left.prev, pm->new_id});
        }
      }
      if (left.next >= 0) {
        if (const Merge* nm = FindMerge(left.id, symbols[left.next].id)) {
          queue.push(Candidate{nm->rank, top.pos, nm->new_id});
        }
      }
    }
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) ids->push_back(symbols[i].id);
}

}  // namespace gantry::tokenizer
