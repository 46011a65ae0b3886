// The KV memory of a worker (a paged cache, as vLLM's): one KvPool of fixed-size
// blocks, each holding the keys and values of kBlockTokens consecutive positions of one
// sequence in every layer, F16 or Q8_0 (KvType); and a KvCache per sequence, the table
// of the blocks that hold its positions in order.
//
// Prefix reuse. A full block is identified by a key that chains the tenant and every
// token up to its end: key(0) = H("gantry.kv.v1", tenant), key(j+1) = H(key(j), the
// block's tokens), H being SHA-256 cut to 128 bits. Equal keys mean the same tenant and
// the same tokens at the same positions, so the same keys and values. When a block
// fills, it is published under its key and becomes immutable; any sequence of the same
// tenant whose tokens reach that far shares it (reference counted, never written
// again). Another tenant's chain starts from another key(0): its lookups can never
// reach this tenant's blocks. When a sequence ends, the start of its last, partly
// filled block is published too, as a partial block, and a later sequence copies the
// positions it has in common (copy-on-write: a published block is never written; the
// writer takes a copy). Blocks no sequence holds stay cached for reuse until the pool
// needs them: the least recently released is evicted first (a sequence releases its
// blocks last to first, so a prefix outlives its tail).
//
// Thread-safety: none. A pool and its caches are used by one thread at a time (the
// engine's scheduler; Forward::Eval writes and reads block data, never the tables).
#ifndef GANTRY_WORKER_MODEL_KV_CACHE_H_
#define GANTRY_WORKER_MODEL_KV_CACHE_H_

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "worker/model/model.h"

namespace gantry::model {

// How keys and values are stored (gantry-worker --kv-cache-type, llama.cpp's
// --cache-type-k/-v):
//   kF16: IEEE half, keys [kBlockTokens][kv_dim] per block and layer, values transposed
//         [kv_dim][kBlockTokens] (attention's output is then a product with rows of
//         positions);
//   kQ8_0: ggml's Q8_0 (per 32 values an fp16 scale and 32 int8, 34 bytes), keys and
//         values both [kBlockTokens] rows of kv_dim / 32 blocks: 1.06 bytes a value
//         against F16's 2. Needs head_dim a multiple of 32.
enum class KvType { kF16, kQ8_0 };

// "f16" / "q8_0".
const char* KvTypeName(KvType type);
// Parses a KvTypeName; false for anything else.
bool ParseKvType(absl::string_view name, KvType* type);

class KvPool {
 public:
  static constexpr int kBlockTokens = 32;

  // OK, or INVALID_ARGUMENT saying why `config` cannot keep its cache as `type`.
  static absl::Status Supports(const ModelConfig& config, KvType type);
  // The type a pool asked for `type` keeps: `type`, or F16 where Supports refuses it.
  static KvType Kept(const ModelConfig& config, KvType type) {
    return Supports(config, type).ok() ? type : KvType::kF16;
  }

  // A pool of `blocks` blocks keeping keys and values as `type`, or as F16 where
  // Supports(config, type) refuses it (type() says which).
  KvPool(const ModelConfig& config, int blocks, KvType type = KvType::kF16);
  KvPool(const KvPool&) = delete;
  KvPool& operator=(const KvPool&) = delete;

  // Bytes of one head's keys (or values) of one position.
  static size_t HeadBytes(int head_dim, KvType type);
  // Bytes of one position's keys (or values) in one layer: n_head_kv heads.
  static size_t RowBytes(const ModelConfig& config, KvType type) {
    return static_cast<size_t>(config.n_head_kv) * HeadBytes(config.head_dim, type);
  }
  // Bytes one position takes: keys and values of every layer.
  static size_t BytesPerToken(const ModelConfig& config, KvType type) {
    return 2 * static_cast<size_t>(config.n_layer) * RowBytes(config, type);
  }
  static size_t BlockBytes(const ModelConfig& config, KvType type) {
    return BytesPerToken(config, type) * kBlockTokens;
  }
  // Blocks that hold `tokens` positions.
  static int BlocksFor(int64_t tokens) { return static_cast<int>((tokens + kBlockTokens - 1) / kBlockTokens); }

  int blocks() const { return static_cast<int>(meta_.size()); }
  // Blocks some sequence holds.
  int in_use() const { return in_use_; }
  // Blocks no sequence holds that keep a published prefix for reuse (evictable).
  int cached() const { return static_cast<int>(lru_.size()); }
  // Blocks a sequence can take now: the free ones and the cached ones.
  int available() const { return blocks() - in_use_; }
  // Positions held in blocks, in use or cached.
  int64_t tokens_held() const { return tokens_held_; }
  size_t bytes() const { return data_.size(); }
  KvType type() const { return type_; }

  // Block data in the layout of type() (see KvType): the keys of `block` in `layer`,
  // then its values.
  uint8_t* keys(int block, int layer) { return data_.data() + Offset(block, layer); }
  uint8_t* values(int block, int layer) { return keys(block, layer) + kBlockTokens * row_bytes_; }
  size_t kv_dim() const { return kv_dim_; }
  // Bytes of one position's keys in one layer (one row of a block's keys).
  size_t row_bytes() const { return row_bytes_; }
  size_t block_bytes() const { return Offset(1, 0); }

 private:
  friend class KvCache;
  struct Block {
    int refs = 0;
    bool published = false;
    int n = 0;           // positions written and committed
    std::string parent;  // the chain key before this block (published blocks)
    std::string key;     // its own key (published full blocks)
    std::vector<int32_t> tokens;
    std::list<int>::iterator lru;  // valid while cached
  };

  size_t Offset(int block, int layer) const {
    return (static_cast<size_t>(block) * n_layer_ + layer) * 2 * kBlockTokens * row_bytes_;
  }
  // A block for a sequence to write (refs 1): a free one, else the least recently
  // released cached one, evicted. -1 when every block is in use.
  int Take();
  void Hold(int block);
  // refs - 1; at 0 a published block is cached, any other freed.
  void Drop(int block);
  // Publishes `block` (held, its first `n` positions complete) under the chain key
  // `parent`; a full one also under its own key, unless that key is already published.
  void Publish(int block, const std::string& parent, const std::string& key, const int32_t* tokens, int n);
  void Unpublish(int block);
  // The published full block with this key, or -1.
  int Find(const std::string& key) const;
  // Of the blocks published after `parent`, the one sharing the longest start with
  // tokens[0..n): its id and that length (-1, 0 when none).
  std::pair<int, int> FindLongest(const std::string& parent, const int32_t* tokens, int n) const;
  // A block taken (Take) holding a copy of `from`'s data, its first `n` positions
  // committed; -1 when none is left. `from` is never the one evicted for it.
  int TakeCopy(int from, int n);

  const int n_layer_;
  const size_t kv_dim_;
  const KvType type_;
  const size_t row_bytes_;
  std::vector<uint8_t> data_;
  std::vector<Block> meta_;
  std::vector<int> free_;
  std::list<int> lru_;  // cached blocks, least recently released first
  std::unordered_map<std::string, int> full_;
  std::unordered_multimap<std::string, int> after_;  // parent key -> published blocks
  int in_use_ = 0;
  int64_t tokens_held_ = 0;
};

// One sequence's positions: the blocks of a pool that hold them, in order. Appending
// takes blocks from the pool (Grow); a full block is published when Forward completes
// it (Commit); destruction releases every block (the last, partial one published first
// so the next turn can copy it).
class KvCache {
 public:
  // A cache of at most `capacity` positions in `pool` (not owned; must outlive it),
  // reusing only blocks of `tenant`.
  KvCache(KvPool* pool, int capacity, const std::string& tenant = "");
  // A cache with a pool of its own, sized for `capacity` (one sequence alone).
  KvCache(const ModelConfig& config, int capacity, KvType type = KvType::kF16);
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  int n_past() const { return static_cast<int>(tokens_.size()); }
  int capacity() const { return capacity_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  KvPool& pool() const { return *pool_; }
  // Blocks held.
  int blocks() const { return static_cast<int>(table_.size()); }
  // The block holding position `pos` (< the room Grow() made).
  int block_at(int pos) const { return table_[pos / KvPool::kBlockTokens]; }
  // Position `pos`'s keys in `layer` (a row of row_bytes()), and its values: the same
  // for Q8_0; for F16 kv_dim halves kBlockTokens apart (a column of the block's
  // transposed values).
  uint8_t* keys_at(int layer, int pos) const {
    return pool_->keys(block_at(pos), layer) + static_cast<size_t>(pos % KvPool::kBlockTokens) * pool_->row_bytes();
  }
  uint8_t* values_at(int layer, int pos) const {
    const size_t at = pos % KvPool::kBlockTokens;
    return pool_->values(block_at(pos), layer) +
           (pool_->type() == KvType::kF16 ? at * sizeof(uint16_t) : at * pool_->row_bytes());
  }

  // Takes, for a cache that holds no block yet (else does nothing), the longest start of tokens[0..limit) its tenant has in
  // the pool: full blocks shared, then the start of a next one copied. Returns the
  // positions it now holds.
  int Reuse(const std::vector<int32_t>& tokens, int limit);
  // Makes room to append up to `n` positions: takes blocks (and copies a published
  // block about to be written). Returns the positions that now fit, <= n (fewer when
  // the pool is short or the capacity reached).
  int Grow(int n);
  // Appends `n` tokens whose keys and values Forward wrote; publishes blocks they filled.
  void Commit(const int32_t* tokens, int n);
  // Keeps the first `n` positions (n <= n_past()).
  void Truncate(int n);
  // Releases every block: empty again.
  void Clear();

  // Bytes of the blocks this cache holds.
  size_t Bytes() const { return table_.size() * pool_->block_bytes(); }

 private:
  std::string KeyAfter(const std::string& parent, const int32_t* tokens) const;
  // The chain key before block j.
  const std::string& ParentOf(size_t j) const { return j == 0 ? root_ : keys_[j - 1]; }

  std::unique_ptr<KvPool> own_pool_;
  KvPool* pool_;
  int capacity_;
  std::string root_;
  std::vector<int> table_;
  std::vector<std::string> keys_;  // of each full block, in order
  std::vector<int32_t> tokens_;
};

}  // namespace gantry::model

#endif  // GANTRY_WORKER_MODEL_KV_CACHE_H_
