#include "tokenizer-svc/tokenizer/spm_merges.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace gantry::tokenizer {
namespace {

struct Candidate {
  double priority;
  int32_t piece;
  int32_t left;
  int32_t right;
};

bool IsContinuationByte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

}  // namespace

absl::StatusOr<std::vector<std::pair<int32_t, int32_t>>> SpmMerges(const std::vector<SpmPiece>& pieces) {
  absl::flat_hash_map<absl::string_view, int32_t> ids;
  ids.reserve(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (!pieces[i].text.empty()) ids.emplace(pieces[i].text, static_cast<int32_t>(i));
  }
  std::vector<Candidate> candidates;
  uint64_t checks = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    absl::string_view text = pieces[i].text;
    if (text.size() < 2 || text.size() > kMaxSpmPieceBytes) continue;
    auto self = ids.find(text);
    if (self == ids.end() || self->second != static_cast<int32_t>(i)) continue;  // a duplicate
    for (size_t k = 1; k < text.size(); ++k) {
      if (IsContinuationByte(text[k])) continue;  // split on character boundaries only
      if (++checks > kMaxSpmSplitChecks) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "SentencePiece vocabulary too large to rebuild its merges (more than ", kMaxSpmSplitChecks,
            " splits)"));
      }
      auto left = ids.find(text.substr(0, k));
      if (left == ids.end()) continue;
      auto right = ids.find(text.substr(k));
      if (right == ids.end()) continue;
      if (candidates.size() >= kMaxSpmMerges) {
        return absl::ResourceExhaustedError(
            absl::StrCat("SentencePiece vocabulary yields more than ", kMaxSpmMerges, " merges"));
      }
      double priority = pieces[i].priority;
      if (std::isnan(priority)) priority = -std::numeric_limits<double>::infinity();  // keeps the order strict
      candidates.push_back({priority, static_cast<int32_t>(i), left->second, right->second});
    }
  }
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    if (a.priority != b.priority) return a.priority > b.priority;
    if (a.piece != b.piece) return a.piece < b.piece;
    if (a.left != b.left) return a.left < b.left;
    return a.right < b.right;
  });
  std::vector<std::pair<int32_t, int32_t>> merges;
  merges.reserve(candidates.size());
  for (const Candidate& c : candidates) merges.emplace_back(c.left, c.right);
  return merges;
}

}  // namespace gantry::tokenizer
