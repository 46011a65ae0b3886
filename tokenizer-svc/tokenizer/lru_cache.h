// A bounded, thread-safe least-recently-used map from byte strings to immutable values,
// for caches whose entries are exact: a value is a pure function of its key (the key
// holds every input the value depends on), so a hit returns what a recomputation would.
//
// Bounded by the number of entries and by a byte budget (the key's bytes plus the cost
// the caller gives for the value); the least recently used entries go first. A value
// larger than the whole budget is not kept.
//
// Thread-safety: every method may run concurrently (one mutex). Values are handed out
// as shared_ptr<const V>, so an entry evicted while a caller still uses it stays alive.
#ifndef GANTRY_TOKENIZER_SVC_TOKENIZER_LRU_CACHE_H_
#define GANTRY_TOKENIZER_SVC_TOKENIZER_LRU_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace gantry::tokenizer {

template <typename V>
class LruCache {
 public:
  LruCache(size_t max_entries, size_t max_bytes) : max_entries_(max_entries), max_bytes_(max_bytes) {}
  LruCache(const LruCache&) = delete;
  LruCache& operator=(const LruCache&) = delete;

  // The value of `key` (now the most recently used), or nullptr.
  std::shared_ptr<const V> Find(absl::string_view key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) {
      ++stats_.misses;
      return nullptr;
    }
    ++stats_.hits;
    order_.splice(order_.begin(), order_, it->second);
    return it->second->value;
  }

  // Keeps `value` under `key` (replacing an entry of the same key); `value_bytes` is its
  // share of the byte budget.
  void Insert(std::string key, std::shared_ptr<const V> value, size_t value_bytes) {
    const size_t bytes = key.size() + value_bytes;
    if (bytes > max_bytes_ || max_entries_ == 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = index_.find(key); it != index_.end()) Erase(it->second);
    order_.push_front(Node{std::move(key), std::move(value), bytes});
    index_.emplace(order_.front().key, order_.begin());
    bytes_ += bytes;
    while (order_.size() > max_entries_ || bytes_ > max_bytes_) {
      Erase(std::prev(order_.end()));
      ++stats_.evictions;
    }
  }

  struct Stats {
    size_t entries = 0;
    size_t bytes = 0;
    uint64_t hits = 0;    // Find() calls that found their key
    uint64_t misses = 0;  // and those that did not
    uint64_t evictions = 0;
  };
  Stats stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    Stats out = stats_;
    out.entries = order_.size();
    out.bytes = bytes_;
    return out;
  }

 private:
  struct Node {
    std::string key;  // index_ holds views of it: list nodes never move
    std::shared_ptr<const V> value;
    size_t bytes;
  };
  using Iterator = typename std::list<Node>::iterator;

  void Erase(Iterator node) {
    bytes_ -= node->bytes;
    index_.erase(absl::string_view(node->key));
    order_.erase(node);
  }

  const size_t max_entries_;
  const size_t max_bytes_;
  mutable std::mutex mu_;
  std::list<Node> order_;  // most recently used first
  absl::flat_hash_map<absl::string_view, Iterator> index_;
  size_t bytes_ = 0;
  Stats stats_;  // the counters
};

}  // namespace gantry::tokenizer

#endif  // GANTRY_TOKENIZER_SVC_TOKENIZER_LRU_CACHE_H_
