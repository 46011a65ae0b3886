#include "worker/model/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/sha256.h"

namespace gantry::model {
namespace {

constexpr int B = KvPool::kBlockTokens;
// Hex digits of a chain key kept: 128 bits.
constexpr size_t kKeyDigits = 32;

int CommonStart(const int32_t* a, const int32_t* b, int n) {
  int i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

// Q8_0: 32 values in 34 bytes.
constexpr size_t kQ8Values = 32, kQ8Bytes = 34;

}  // namespace

const char* KvTypeName(KvType type) { return type == KvType::kQ8_0 ? "q8_0" : "f16"; }

bool ParseKvType(absl::string_view name, KvType* type) {
  for (KvType t : {KvType::kF16, KvType::kQ8_0}) {
    if (name == KvTypeName(t)) {
      *type = t;
      return true;
    }
  }
  return false;
}

absl::Status KvPool::Supports(const ModelConfig& c, KvType type) {
  if (type == KvType::kQ8_0 && c.head_dim % kQ8Values != 0) {
    return absl::InvalidArgumentError(absl::StrCat("a q8_0 KV cache needs a head dimension that is a multiple of 32; ",
                                                   "this model's is ", c.head_dim));
  }
  return absl::OkStatus();
}

size_t KvPool::HeadBytes(int head_dim, KvType type) {
  return type == KvType::kQ8_0 ? head_dim / kQ8Values * kQ8Bytes : head_dim * sizeof(uint16_t);
}

KvPool::KvPool(const ModelConfig& c, int blocks, KvType type)
    : n_layer_(c.n_layer),
      kv_dim_(static_cast<size_t>(c.n_head_kv) * c.head_dim),
      type_(Kept(c, type)),
      row_bytes_(RowBytes(c, type_)) {
  blocks = std::max(1, blocks);
  // Zero-initialised: a product over positions never written multiplies zeros (F16
  // zeros, or Q8_0 blocks of scale 0), never the bits of a NaN.
  data_.resize(static_cast<size_t>(blocks) * n_layer_ * 2 * B * row_bytes_);
  meta_.resize(blocks);
  for (int b = blocks - 1; b >= 0; --b) free_.push_back(b);
}

int KvPool::Take() {
  int b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else if (!lru_.empty()) {
    b = lru_.front();
    lru_.pop_front();
    Unpublish(b);
    tokens_held_ -= meta_[b].n;
    meta_[b].n = 0;
  } else {
    return -1;
  }
  meta_[b].refs = 1;
  ++in_use_;
  return b;
}

void KvPool::Hold(int b) {
  Block& m = meta_[b];
  if (m.refs++ > 0) return;
  lru_.erase(m.lru);
  ++in_use_;
}

void KvPool::Drop(int b) {
  Block& m = meta_[b];
  if (--m.refs > 0) return;
  --in_use_;
  if (m.published) {
    m.lru = lru_.insert(lru_.end(), b);
    return;
  }
  tokens_held_ -= m.n;
  m.n = 0;
  free_.push_back(b);
}

void KvPool::Publish(int b, const std::string& parent, const std::string& key, const int32_t* tokens, int n) {
  Block& m = meta_[b];
  if (m.published) return;
  if (n == B) {
    if (full_.count(key)) return;  // the same positions are already published
    full_.emplace(key, b);
    m.key = key;
  }
  m.published = true;
  m.parent = parent;
  m.tokens.assign(tokens, tokens + n);
  after_.emplace(parent, b);
}

void KvPool::Unpublish(int b) {
  Block& m = meta_[b];
  if (!m.published) return;
  if (!m.key.empty()) {
    full_.erase(m.key);
    m.key.clear();
  }
  auto range = after_.equal_range(m.parent);
  for (auto it = range.first; it != range.second; ++it) {
    if (it->second == b) {
      after_.erase(it);
      break;
    }
  }
  m.published = false;
  m.parent.clear();
  m.tokens.clear();
}

int KvPool::Find(const std::string& key) const {
  auto it = full_.find(key);
  return it == full_.end() ? -1 : it->second;
}

std::pair<int, int> KvPool::FindLongest(const std::string& parent, const int32_t* tokens, int n) const {
  std::pair<int, int> best(-1, 0);
  auto range = after_.equal_range(parent);
  for (auto it = range.first; it != range.second; ++it) {
    const Block& m = meta_[it->second];
    const int common = CommonStart(m.tokens.data(), tokens, std::min(n, static_cast<int>(m.tokens.size())));
    if (common > best.second) best = {it->second, common};
  }
  return best;
}

int KvPool::TakeCopy(int from, int n) {
  Hold(from);
  const int to = Take();
  if (to >= 0) {
    std::memcpy(data_.data() + Offset(to, 0), data_.data() + Offset(from, 0), block_bytes());
    meta_[to].n = n;
    tokens_held_ += n;
  }
  Drop(from);
  return to;
}

KvCache::KvCache(KvPool* pool, int capacity, const std::string& tenant)
    : pool_(pool), capacity_(capacity) {
  std::string seed("gantry.kv.v1");
  seed.push_back('\0');
  seed += tenant;
  root_ = Sha256Hex(seed).substr(0, kKeyDigits);
}

KvCache::KvCache(const ModelConfig& config, int capacity, KvType type)
    : KvCache(nullptr, capacity) {
  // One block more than the positions need: the copy a write into a published block
  // takes after Truncate().
  own_pool_ = std::make_unique<KvPool>(config, KvPool::BlocksFor(capacity) + 1, type);
  pool_ = own_pool_.get();
}

KvCache::~KvCache() { Clear(); }

std::string KvCache::KeyAfter(const std::string& parent, const int32_t* tokens) const {
  Sha256 h;
  h.Update(parent);
  h.Update(absl::string_view(reinterpret_cast<const char*>(tokens), B * sizeof(int32_t)));
  return h.HexDigest().substr(0, kKeyDigits);
}

int KvCache::Reuse(const std::vector<int32_t>& tokens, int limit) {
  if (!table_.empty()) return n_past();  // only a cache that holds no block yet
  limit = std::min({limit, static_cast<int>(tokens.size()), capacity_});
  size_t j = 0;
  // Full blocks, shared.
  while (static_cast<int>((j + 1) * B) <= limit) {
    const int32_t* block_tokens = tokens.data() + j * B;
    std::string key = KeyAfter(ParentOf(j), block_tokens);
    const int b = pool_->Find(key);
    if (b < 0) break;
    pool_->Hold(b);
    table_.push_back(b);
    keys_.push_back(std::move(key));
    tokens_.insert(tokens_.end(), block_tokens, block_tokens + B);
    ++j;
  }
  // The start of the next block, copied.
  const int rest = std::min(B, limit - static_cast<int>(j * B));
  if (rest <= 0) return n_past();
  const int32_t* next = tokens.data() + j * B;
  const auto [from, common] = pool_->FindLongest(ParentOf(j), next, rest);
  if (common == 0) return n_past();
  const int to = pool_->TakeCopy(from, common);
  if (to >= 0) {
    table_.push_back(to);
    tokens_.insert(tokens_.end(), next, next + common);
  }
  return n_past();
}

int KvCache::Grow(int n) {
  const int pos = n_past();
  n = std::max(0, std::min(n, capacity_ - pos));
  if (n == 0) return 0;
  // The block the next position goes to, if already held, may be published (shared or
  // kept for reuse): it is never written; this cache writes a copy.
  const size_t j = static_cast<size_t>(pos / B);
  if (j < table_.size() && pool_->meta_[table_[j]].published) {
    const int to = pool_->TakeCopy(table_[j], pos % B);
    if (to < 0) return 0;
    pool_->Drop(table_[j]);
    table_[j] = to;
  }
  while (static_cast<int>(table_.size()) < KvPool::BlocksFor(pos + n)) {
    const int b = pool_->Take();
    if (b < 0) break;
    table_.push_back(b);
  }
  return std::min(n, static_cast<int>(table_.size()) * B - pos);
}

void KvCache::Commit(const int32_t* tokens, int n) {
  for (int i = 0; i < n; ++i) ++pool_->meta_[block_at(n_past() + i)].n;
  pool_->tokens_held_ += n;
  tokens_.insert(tokens_.end(), tokens, tokens + n);
  while (keys_.size() < tokens_.size() / B) {
    const size_t j = keys_.size();
    keys_.push_back(KeyAfter(ParentOf(j), tokens_.data() + j * B));
    pool_->Publish(table_[j], ParentOf(j), keys_.back(), tokens_.data() + j * B, B);
  }
}

void KvCache::Truncate(int n) {
  n = std::max(0, std::min(n, n_past()));
  const size_t keep = static_cast<size_t>(KvPool::BlocksFor(n));
  while (table_.size() > keep) {
    pool_->Drop(table_.back());
    table_.pop_back();
  }
  if (n % B != 0) {
    KvPool::Block& m = pool_->meta_[table_.back()];
    if (!m.published) {  // a published block stays as it is; Grow() copies it
      pool_->tokens_held_ -= m.n - n % B;
      m.n = n % B;
    }
  }
  tokens_.resize(n);
  keys_.resize(std::min(keys_.size(), static_cast<size_t>(n / B)));
}

void KvCache::Clear() {
  // The last block's start is published for the next turn to copy.
  const int pos = n_past();
  if (pos % B != 0) {
    const size_t j = static_cast<size_t>(pos / B);
    pool_->Publish(table_[j], ParentOf(j), "", tokens_.data() + j * B, pos % B);
  }
  while (!table_.empty()) {
    pool_->Drop(table_.back());
    table_.pop_back();
  }
  keys_.clear();
  tokens_.clear();
}

}  // namespace gantry::model
