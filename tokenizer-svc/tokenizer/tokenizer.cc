#include "tokenizer-svc/tokenizer/tokenizer.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file.h"
#include "common/json.h"
#include "common/status.h"
#include "common/utf8.h"
#include "formats/gguf/gguf.h"
#include "tokenizer-svc/tokenizer/added_tokens.h"
#include "tokenizer-svc/tokenizer/decoder.h"
#include "tokenizer-svc/tokenizer/json_fields.h"
#include "tokenizer-svc/tokenizer/lru_cache.h"
#include "tokenizer-svc/tokenizer/model_bpe.h"
#include "tokenizer-svc/tokenizer/normalizer.h"
#include "tokenizer-svc/tokenizer/post_processor.h"
#include "tokenizer-svc/tokenizer/pre_tokenizer.h"

namespace gantry::tokenizer {
namespace {

// OUT_OF_RANGE once `count` ids pass `max_ids` (0: no limit).
absl::Status WithinLimit(size_t count, size_t max_ids) {
  if (max_ids == 0 || count <= max_ids) return absl::OkStatus();
  return absl::OutOfRangeError(absl::StrCat("the text has more than ", max_ids, " tokens"));
}

// tokenizer.json files are tens of MB; anything far larger is not one.
constexpr size_t kMaxFileBytes = 512u << 20;

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  return ReadFileToString(path, kMaxFileBytes);
}

// The content of a tokenizer_config.json special-token entry: "text" or
// {"content": "text", ...}.
absl::optional<std::string> ConfigTokenContent(const json::Value& config, absl::string_view key) {
  const json::Value* v = Member(config, key);
  if (v == nullptr) return absl::nullopt;
  if (v->is_string()) return v->as_string();
  const json::Value* content = Member(*v, "content");
  if (content != nullptr && content->is_string()) return content->as_string();
  return absl::nullopt;
}

}  // namespace

Tokenizer::Tokenizer() {
  for (auto& cache : section_cache_) {
    cache = std::make_unique<LruCache<std::vector<int32_t>>>(kSectionCacheEntries / 4,
                                                             kSectionCacheBytes / 4);
  }
}
Tokenizer::~Tokenizer() = default;

uint64_t Tokenizer::section_cache_hits() const {
  uint64_t n = 0;
  for (const auto& cache : section_cache_) n += cache->stats().hits;
  return n;
}
uint64_t Tokenizer::section_cache_misses() const {
  uint64_t n = 0;
  for (const auto& cache : section_cache_) n += cache->stats().misses;
  return n;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Load(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return absl::NotFoundError(absl::StrCat("no such path: ", path));
  if (!S_ISDIR(st.st_mode)) {
    char magic[4] = {};
    if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
      size_t n = std::fread(magic, 1, sizeof(magic), f);
      std::fclose(f);
      if (n == 4 && std::string(magic, 4) == "GGUF") {
        auto file = gguf::GgufFile::Open(path);
        if (!file.ok()) {
          // GgufFile::Open drops the reason when it prefixes the path; every
          // INVALID_ARGUMENT from it is a malformed file.
          std::string reason = ReasonOf(file.status());
          if (reason.empty() && file.status().code() == absl::StatusCode::kInvalidArgument) {
            reason = "invalid_gguf";
          }
          return Error(file.status().code(), reason,
                       absl::StrCat("not a valid GGUF file: ", file.status().message()));
        }
        auto tokenizer = FromGguf(**file);
        if (!tokenizer.ok()) {
          return absl::Status(tokenizer.status().code(),
                              absl::StrCat(path, ": ", tokenizer.status().message()));
        }
        return tokenizer;
      }
    }
    return absl::InvalidArgumentError(absl::StrCat(
        path, " is neither a directory nor a GGUF file; pass a directory holding tokenizer.json "
              "or a .gguf model"));
  }
  GANTRY_ASSIGN_OR_RETURN(std::string tokenizer_json, ReadFile(path + "/tokenizer.json"));
  std::string config_json;
  std::string config_path = path + "/tokenizer_config.json";
  if (stat(config_path.c_str(), &st) == 0) {
    GANTRY_ASSIGN_OR_RETURN(config_json, ReadFile(config_path));
  }
  auto tokenizer = FromJson(tokenizer_json, config_json);
  if (!tokenizer.ok()) {
    return absl::Status(tokenizer.status().code(),
                        absl::StrCat(path, ": ", tokenizer.status().message()));
  }
  return tokenizer;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromJson(absl::string_view tokenizer_json,
                                                               absl::string_view config_json) {
  GANTRY_ASSIGN_OR_RETURN(json::Value root, json::Parse(tokenizer_json));
  if (!root.is_object()) return JsonError("top level", "expected an object");
  std::unique_ptr<Tokenizer> t(new Tokenizer());

  if (const json::Value* v = Member(root, "normalizer"); v != nullptr && !v->is_null()) {
    GANTRY_ASSIGN_OR_RETURN(t->normalizer_, Normalizer::FromJson(*v));
  }
  if (const json::Value* v = Member(root, "pre_tokenizer"); v != nullptr && !v->is_null()) {
    GANTRY_ASSIGN_OR_RETURN(t->pre_tokenizer_, PreTokenizer::FromJson(*v));
  }
  const json::Value* model = Member(root, "model");
  if (model == nullptr) return JsonError("model", "missing");
  bool byte_level = t->pre_tokenizer_ != nullptr && t->pre_tokenizer_->byte_level();
  GANTRY_ASSIGN_OR_RETURN(t->model_, BpeModel::FromJson(*model, byte_level));

  const json::Value* added = Member(root, "added_tokens");
  int64_t added_count = added != nullptr && added->is_array() ? added->items().size() : 0;
  GANTRY_ASSIGN_OR_RETURN(
      AddedVocabulary vocabulary,
      AddedVocabulary::FromJson(added, t->normalizer_.get(), t->model_->id_end() + 2 * added_count + 1024));
  t->added_ = std::make_unique<AddedVocabulary>(std::move(vocabulary));

  if (const json::Value* v = Member(root, "post_processor"); v != nullptr && !v->is_null()) {
    GANTRY_ASSIGN_OR_RETURN(t->post_processor_, PostProcessor::FromJson(*v));
  }
  const json::Value* decoder = Member(root, "decoder");
  GANTRY_ASSIGN_OR_RETURN(t->decoder_, Decoder::FromJson(decoder == nullptr ? json::Value() : *decoder));

  t->vocab_size_ = t->model_->id_end();
  for (const AddedToken& token : t->added_->tokens()) {
    t->vocab_size_ = std::max(t->vocab_size_, token.id + 1);
  }

  if (!config_json.empty()) {
    auto config = json::Parse(config_json);
    if (!config.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer_config.json: ", config.status().message()));
    }
    if (auto bos = ConfigTokenContent(*config, "bos_token")) t->bos_id_ = t->TokenId(*bos);
    if (auto eos = ConfigTokenContent(*config, "eos_token")) t->eos_id_ = t->TokenId(*eos);
  }
  return t;
}

absl::Status Tokenizer::EncodeSectionCached(absl::string_view raw, bool first_section,
                                            bool split_special, bool use_cache,
                                            size_t max_ids, std::vector<int32_t>* ids) const {
  if (!use_cache || raw.size() < kMinCachedSectionBytes) {
    return EncodeSection(raw, first_section, split_special, max_ids, ids);
  }
  // The key: every input of EncodeSection (the tokenizer is this one): the flags pick
  // the cache, the bytes are the key.
  LruCache<std::vector<int32_t>>& cache =
      *section_cache_[(first_section ? 1 : 0) | (split_special ? 2 : 0)];
  if (std::shared_ptr<const std::vector<int32_t>> hit = cache.Find(raw)) {
    ids->insert(ids->end(), hit->begin(), hit->end());
    return WithinLimit(ids->size(), max_ids);
  }
  const size_t start = ids->size();
  // (A section stopped at the limit is not kept: its ids are not all there.)
  GANTRY_RETURN_IF_ERROR(EncodeSection(raw, first_section, split_special, max_ids, ids));
  auto value = std::make_shared<const std::vector<int32_t>>(ids->begin() + start, ids->end());
  const size_t value_bytes = value->size() * sizeof(int32_t) + 64;  // + the entry's own
  cache.Insert(std::string(raw), std::move(value), value_bytes);
  return absl::OkStatus();
}

absl::Status Tokenizer::EncodeSection(absl::string_view raw, bool first_section, bool split_special,
                                      size_t max_ids, std::vector<int32_t>* ids) const {
  // Text of n bytes needs at least ceil(n / per_token) ids (each id stands for at most
  // per_token bytes, and pieces do not overlap): text that cannot fit in what is left
  // of `max_ids` is refused before the work on it, a segment before its pre-tokenizer
  // split (15 MiB of short words would be millions of pieces), a piece before its BPE
  // (15 MiB of one letter).
  const size_t per_token = model_->max_bytes_per_token();
  auto fits = [&](size_t bytes) {
    if (max_ids == 0 || per_token == 0) return absl::OkStatus();
    return WithinLimit(ids->size() + (bytes + per_token - 1) / per_token, max_ids);
  };
  auto encode = [&](absl::string_view piece) -> absl::Status {
    GANTRY_RETURN_IF_ERROR(fits(piece.size()));
    model_->Encode(piece, ids);
    return WithinLimit(ids->size(), max_ids);
  };
  std::string normalized(raw);
  if (normalizer_ != nullptr) GANTRY_RETURN_IF_ERROR(normalizer_->Normalize(&normalized));
  std::vector<AddedVocabulary::Segment> segments;
  added_->Split(normalized, /*normalized_set=*/true, split_special, &segments);
  Pieces pieces;
  for (size_t i = 0; i < segments.size(); ++i) {
    const auto& segment = segments[i];
    if (segment.id >= 0) {
      ids->push_back(segment.id);
      GANTRY_RETURN_IF_ERROR(WithinLimit(ids->size(), max_ids));
      continue;
    }
    absl::string_view text = absl::string_view(normalized).substr(segment.begin, segment.end - segment.begin);
    if (pre_tokenizer_ == nullptr) {
      GANTRY_RETURN_IF_ERROR(encode(text));
      continue;
    }
    GANTRY_RETURN_IF_ERROR(fits(text.size()));
    GANTRY_RETURN_IF_ERROR(pre_tokenizer_->Split(text, first_section && i == 0, &pieces));
    for (absl::string_view piece : pieces.views) GANTRY_RETURN_IF_ERROR(encode(piece));
    pieces.storage.clear();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> Tokenizer::Encode(absl::string_view text,
                                                       const EncodeOptions& options) const {
  if (!IsValidUtf8(text)) return absl::InvalidArgumentError("text is not valid UTF-8");
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<AddedVocabulary::Segment> segments;
  const AddedVocabulary::Ranges* literal =
      options.literal_ranges.empty() ? nullptr : &options.literal_ranges;
  added_->Split(text, /*normalized_set=*/false, options.split_special, &segments, literal);
  for (size_t i = 0; i < segments.size(); ++i) {
    const auto& segment = segments[i];
    if (segment.id >= 0) {
      ids.push_back(segment.id);
      GANTRY_RETURN_IF_ERROR(WithinLimit(ids.size(), options.max_ids));
      continue;
    }
    // Offsets do not survive normalization: a section that holds literal text keeps
    // every special token in it as text (normalized special tokens are rare).
    bool split = options.split_special ||
                 (literal != nullptr && AddedVocabulary::Overlaps(*literal, segment.begin, segment.end));
    GANTRY_RETURN_IF_ERROR(EncodeSectionCached(
        text.substr(segment.begin, segment.end - segment.begin), i == 0, split,
        options.use_section_cache, options.max_ids, &ids));
  }
  if (options.add_special && post_processor_ != nullptr) post_processor_->AddSpecialTokens(&ids);
  GANTRY_RETURN_IF_ERROR(WithinLimit(ids.size(), options.max_ids));
  return ids;
}

size_t Tokenizer::MinIdsFor(size_t text_bytes) const {
  size_t longest = model_->max_bytes_per_token();
  if (longest == 0) return 0;
  for (const AddedToken& token : added_->tokens()) {
    if (token.lstrip || token.rstrip) return 0;
    longest = std::max(longest, token.content.size());
  }
  if (normalizer_ != nullptr) {
    const size_t shrink = normalizer_->MaxShrink();
    if (shrink == 0) return 0;
    longest *= shrink;
  }
  return (text_bytes + longest - 1) / longest;
}

bool Tokenizer::HasNormalizedSpecialTokens() const {
  for (const AddedToken& token : added_->tokens()) {
    if (token.special && token.normalized) return true;
  }
  return false;
}

std::vector<std::pair<size_t, size_t>> Tokenizer::FindSpecialText(absl::string_view text) const {
  AddedVocabulary::Ranges ranges;
  added_->FindSpecial(text, &ranges);
  return ranges;
}

absl::StatusOr<std::string> Tokenizer::DecodeToBytes(const std::vector<int32_t>& ids,
                                                     bool skip_special) const {
  std::vector<DecodePiece> pieces;
  pieces.reserve(ids.size());
  for (int32_t id : ids) {
    if (const AddedToken* token = added_->Find(id)) {
      if (skip_special && token->special) continue;
      pieces.push_back(DecodePiece{token->content, true});
    } else if (const std::string* text = model_->TokenText(id)) {
      pieces.push_back(DecodePiece{*text, false});
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown token id ", id));
    }
  }
  return decoder_->DecodeToBytes(std::move(pieces));
}

absl::StatusOr<std::string> Tokenizer::Decode(const std::vector<int32_t>& ids, bool skip_special) const {
  GANTRY_ASSIGN_OR_RETURN(std::string bytes, DecodeToBytes(ids, skip_special));
  if (IsValidUtf8(bytes)) return bytes;
  std::string text;
  AppendUtf8Lossy(bytes, &text);
  return text;
}

absl::optional<std::string> Tokenizer::TokenText(int32_t id) const {
  if (const AddedToken* token = added_->Find(id)) return token->content;
  if (const std::string* text = model_->TokenText(id)) return *text;
  return absl::nullopt;
}

absl::optional<int32_t> Tokenizer::TokenId(absl::string_view text) const {
  int32_t id = added_->FindContent(text);
  if (id >= 0) return id;
  return model_->TokenId(text);
}

bool Tokenizer::IsSpecial(int32_t id) const {
  const AddedToken* token = added_->Find(id);
  return token != nullptr && token->special;
}

StreamDecoder::StreamDecoder(const Tokenizer* tokenizer, bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special) {}

absl::StatusOr<std::string> StreamDecoder::Push(int32_t id) {
  window_.push_back(id);
  auto bytes = tokenizer_->DecodeToBytes(window_, skip_special_);
  if (!bytes.ok()) {
    window_.pop_back();
    return bytes.status();
  }
  absl::string_view fresh;
  if (bytes->size() > emitted_) fresh = absl::string_view(*bytes).substr(emitted_);
  size_t complete = CompleteUtf8PrefixLength(fresh);
  if (complete < fresh.size() && window_.size() >= kMaxWindow) complete = fresh.size();
  std::string out;
  AppendUtf8Lossy(fresh.substr(0, complete), &out);
  if (complete == fresh.size()) {
    // All emitted: keep only this id as context for the next one.
    window_.assign(1, id);
    GANTRY_ASSIGN_OR_RETURN(std::string context, tokenizer_->DecodeToBytes(window_, skip_special_));
    emitted_ = context.size();
  } else {
    emitted_ += complete;
  }
  return out;
}

std::string StreamDecoder::Finish() {
  std::string out;
  auto bytes = tokenizer_->DecodeToBytes(window_, skip_special_);
  if (bytes.ok() && bytes->size() > emitted_) {
    AppendUtf8Lossy(absl::string_view(*bytes).substr(emitted_), &out);
  }
  window_.clear();
  emitted_ = 0;
  return out;
}

}  // namespace gantry::tokenizer
