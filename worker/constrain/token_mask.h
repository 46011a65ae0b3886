// From a grammar to the tokens a sampler may draw: the vocabulary as bytes in a trie,
// masks computed by walking it with a JsonMatcher (a subtree is skipped at the first
// byte the matcher refuses), and a cache of masks by grammar state.
//
// Exactness: a token is allowed exactly when the matcher accepts every one of its bytes
// (docs/tool-protocols.md, "Constrained generation"). A token's bytes are what it adds
// to the text when it follows other tokens (Vocabulary::FromTokenizer), so a
// SentencePiece piece "▁x" is " x" and a byte-level token that holds part of a UTF-8
// character is those bytes. Special tokens and unused ids have no bytes and are never
// allowed while a constraint is active, except the stop tokens once the value is
// complete.
//
// Thread-safety: a Vocabulary is immutable and shared. A MaskCache and a Constraint are
// used by one thread (the engine's).
#ifndef GANTRY_WORKER_CONSTRAIN_TOKEN_MASK_H_
#define GANTRY_WORKER_CONSTRAIN_TOKEN_MASK_H_

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "worker/constrain/json_grammar.h"

namespace gantry::tokenizer {
class Tokenizer;
}  // namespace gantry::tokenizer

namespace gantry::constrain {

// One bit per token id.
using TokenBits = std::vector<uint64_t>;
inline bool Allows(const TokenBits& bits, int32_t id) {
  return id >= 0 && static_cast<size_t>(id) / 64 < bits.size() && (bits[id / 64] >> (id % 64)) & 1;
}

class Vocabulary {
 public:
  // bytes[id]: the token's bytes. A token is never allowed where special[id] is set
  // (empty: none is) or its bytes are empty; its bytes still count for a trigger.
  explicit Vocabulary(std::vector<std::string> bytes, std::vector<bool> special = {});
  static std::shared_ptr<const Vocabulary> FromTokenizer(const tokenizer::Tokenizer& tokenizer);

  int32_t size() const { return static_cast<int32_t>(bytes_.size()); }
  const std::string& bytes(int32_t id) const { return bytes_[id]; }
  bool special(int32_t id) const { return !special_.empty() && special_[id]; }

  // The tokens `matcher` accepts whole, ORed into `bits` (sized for this vocabulary).
  // Inside a string (JsonMatcher::PlainTextRoom) the plain tokens are taken by their
  // code point counts and only the others are walked.
  void AllowedBy(const JsonMatcher& matcher, TokenBits* bits) const;

  // A token of only plain text (see PlainTextRoom), and its code points (at most 255).
  bool plain(int32_t id) const { return plain_cps_[id] != 0; }

 private:
  // A byte trie in depth-first order: a node's subtree is the nodes up to `end`.
  struct Trie {
    struct Node {
      uint8_t byte;
      uint16_t depth;  // 1 for a first byte
      uint32_t end;
      uint32_t first_id, n_ids;  // into ids
    };
    std::vector<Node> nodes;
    std::vector<int32_t> ids;
    int max_depth = 0;
    void Build(const std::vector<std::string>& bytes, std::vector<int32_t> members);
    void Walk(const JsonMatcher& matcher, TokenBits* bits) const;
  };
  std::vector<std::string> bytes_;
  std::vector<bool> special_;
  std::vector<uint8_t> plain_cps_;  // 0: not plain
  std::vector<int32_t> plain_ids_;
  Trie all_;    // every token that can be allowed
  Trie other_;  // those that are not plain
};

// Masks by (grammar, matcher state), least recently used evicted past `max_bytes`.
class MaskCache {
 public:
  explicit MaskCache(size_t max_bytes = size_t{64} << 20) : max_bytes_(max_bytes) {}
  // The mask of `matcher` (compiled from `grammar_id`), computed on a miss.
  const TokenBits& Get(const Vocabulary& vocabulary, uint64_t grammar_id, const JsonMatcher& matcher);

  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }
  size_t bytes() const { return bytes_; }

 private:
  struct Entry {
    TokenBits bits;
    std::list<std::string>::iterator lru;
  };
  const size_t max_bytes_;
  size_t bytes_ = 0;
  uint64_t hits_ = 0, misses_ = 0;
  std::list<std::string> lru_;  // most recent first
  std::unordered_map<std::string, Entry> entries_;
};

// One generation's constraint. Inactive until `trigger` has appeared in the output
// (immediately when it is empty); then every token must extend the grammar's value.
// Without a `suffix`, once the value is complete only a stop token may follow. With
// one (a tool call's envelope: trigger "<tool_call>", suffix "</tool_call>"), the value
// and then the suffix are constrained, after which the output is free again until the
// next trigger (a lazy grammar, as llama.cpp's for tool calls).
class Constraint {
 public:
  Constraint(std::shared_ptr<const Vocabulary> vocabulary, std::shared_ptr<const JsonGrammar> grammar,
             uint64_t grammar_id, MaskCache* cache, std::vector<int32_t> stop_ids, std::string trigger = "",
             std::string suffix = "");

  // The tokens allowed next, or nullptr while inactive (any token). Valid until the next
  // call of Allowed() on any Constraint sharing the cache.
  const TokenBits* Allowed();
  // The token drawn. Errors: INVALID_ARGUMENT "invalid_output" when the grammar refuses
  // it (a token drawn outside the mask, or the bytes after the trigger in the token
  // that completed it).
  absl::Status Accept(int32_t token);

  bool active() const { return active_; }
  bool complete() const { return active_ && matcher_.Complete(); }
  // Whether it waited for a trigger.
  bool started_late() const { return !trigger_.empty(); }
  // Values completed (with a suffix: calls constrained from trigger to suffix).
  int completed() const { return completed_; }
  const JsonGrammar& grammar() const { return *grammar_; }

 private:
  // After a value: with a suffix, back to waiting for the trigger.
  void Ended();
  std::shared_ptr<const Vocabulary> vocabulary_;
  std::shared_ptr<const JsonGrammar> grammar_;
  const uint64_t grammar_id_;
  MaskCache* cache_;
  std::vector<int32_t> stop_ids_;
  const std::string trigger_;
  const std::string suffix_;
  bool active_;
  int completed_ = 0;
  std::string tail_;  // while inactive: the output's last bytes, to find the trigger
  JsonMatcher matcher_;
  TokenBits allowed_;
};

}  // namespace gantry::constrain

#endif  // GANTRY_WORKER_CONSTRAIN_TOKEN_MASK_H_
