#include "tokenizer-svc/tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/status.h"
#include "tokenizer-svc/tokenizer/json_fields.h"

namespace gantry::tokenizer {
namespace {

// GPT-2's pattern, used by ByteLevel with use_regex (Hugging Face's spelling).
constexpr char kGpt2Pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

}  // namespace

absl::Status PreTokenizer::AddRegexSplit(absl::string_view regex, Behavior behavior, bool invert) {
  Step step;
  step.kind = Kind::kSplit;
  GANTRY_ASSIGN_OR_RETURN(step.pattern.regex, Regex::Compile(regex));
  step.behavior = behavior;
  step.invert = invert;
  steps_.push_back(std::move(step));
  return absl::OkStatus();
}

absl::Status PreTokenizer::AddSteps(const json::Value& v, absl::string_view where) {
  GANTRY_ASSIGN_OR_RETURN(std::string type, TypeOf(v, where));
  if (type == "Sequence") {
    const json::Value* list = Member(v, "pretokenizers");
    if (list == nullptr || !list->is_array()) return JsonError(where, "Sequence needs \"pretokenizers\"");
    for (size_t i = 0; i < list->items().size(); ++i) {
      GANTRY_RETURN_IF_ERROR(AddSteps(list->items()[i], absl::StrCat(where, ".pretokenizers[", i, "]")));
    }
    return absl::OkStatus();
  }
  if (type == "Split") {
    Step step;
    step.kind = Kind::kSplit;
    const json::Value* pattern = Member(v, "pattern");
    if (pattern == nullptr) return JsonError(where, "Split needs \"pattern\"");
    GANTRY_ASSIGN_OR_RETURN(step.pattern, ParsePattern(*pattern, absl::StrCat(where, ".pattern")));
    GANTRY_ASSIGN_OR_RETURN(std::string behavior, StringOr(v, "behavior", "Isolated", where));
    if (behavior == "Removed") {
      step.behavior = Behavior::kRemoved;
    } else if (behavior == "Isolated") {
      step.behavior = Behavior::kIsolated;
    } else if (behavior == "MergedWithPrevious") {
      step.behavior = Behavior::kMergedWithPrevious;
    } else if (behavior == "MergedWithNext") {
      step.behavior = Behavior::kMergedWithNext;
    } else if (behavior == "Contiguous") {
      step.behavior = Behavior::kContiguous;
    } else {
      return JsonError(absl::StrCat(where, ".behavior"), absl::StrCat("unknown behavior '", behavior, "'"));
    }
    GANTRY_ASSIGN_OR_RETURN(step.invert, BoolOr(v, "invert", false, where));
    steps_.push_back(std::move(step));
    return absl::OkStatus();
  }
  if (type == "ByteLevel") {
    byte_level_ = true;
    GANTRY_ASSIGN_OR_RETURN(bool add_prefix_space, BoolOr(v, "add_prefix_space", true, where));
    GANTRY_ASSIGN_OR_RETURN(bool use_regex, BoolOr(v, "use_regex", true, where));
    if (add_prefix_space) {
      Step step;
      step.kind = Kind::kAddPrefixSpace;
      steps_.push_back(std::move(step));
    }
    if (use_regex) return AddRegexSplit(kGpt2Pattern, Behavior::kIsolated, false);
    return absl::OkStatus();
  }
  if (type == "Metaspace") {
    Step step;
    step.kind = Kind::kMetaspace;
    GANTRY_ASSIGN_OR_RETURN(step.replacement, StringOr(v, "replacement", "\xE2\x96\x81", where));
    if (step.replacement.empty()) return JsonError(where, "Metaspace needs a non-empty replacement");
    GANTRY_ASSIGN_OR_RETURN(bool add_prefix_space, BoolOr(v, "add_prefix_space", true, where));
    GANTRY_ASSIGN_OR_RETURN(std::string scheme,
                            StringOr(v, "prepend_scheme", add_prefix_space ? "always" : "never", where));
    if (scheme == "always") {
      step.prepend = 2;
    } else if (scheme == "first") {
      step.prepend = 1;
    } else if (scheme == "never") {
      step.prepend = 0;
    } else {
      return JsonError(where, absl::StrCat("unknown prepend_scheme '", scheme, "'"));
    }
    GANTRY_ASSIGN_OR_RETURN(step.split, BoolOr(v, "split", true, where));
    step.pattern.literal = step.replacement;
    step.behavior = Behavior::kMergedWithNext;
    steps_.push_back(std::move(step));
    return absl::OkStatus();
  }
  if (type == "Whitespace") return AddRegexSplit("\\w+|[^\\w\\s]+", Behavior::kRemoved, true);
  if (type == "WhitespaceSplit") return AddRegexSplit("\\s+", Behavior::kRemoved, false);
  if (type == "Digits") {
    GANTRY_ASSIGN_OR_RETURN(bool individual, BoolOr(v, "individual_digits", false, where));
    return AddRegexSplit("\\p{N}", individual ? Behavior::kIsolated : Behavior::kContiguous, false);
  }
  return absl::UnimplementedError(
      absl::StrCat("tokenizer.json: ", where, ": pre_tokenizer type '", type, "' is not supported"));
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::FromJson(const json::Value& v) {
  std::unique_ptr<PreTokenizer> pre(new PreTokenizer());
  GANTRY_RETURN_IF_ERROR(pre->AddSteps(v, "pre_tokenizer"));
  return pre;
}

absl::Status PreTokenizer::ApplySplit(const Step& step, absl::string_view piece,
                                      std::vector<absl::string_view>* out) {
  std::vector<std::pair<size_t, size_t>> matches;
  GANTRY_RETURN_IF_ERROR(step.pattern.FindAll(piece, &matches));
  // Segments covering the whole piece: (begin, end, is_match).
  struct Segment {
    size_t begin, end;
    bool match;
  };
  std::vector<Segment> segments;
  segments.reserve(matches.size() * 2 + 1);
  size_t last = 0;
  for (const auto& [begin, end] : matches) {
    if (begin > last) segments.push_back({last, begin, step.invert});
    segments.push_back({begin, end, !step.invert});
    last = end;
  }
  if (last < piece.size()) segments.push_back({last, piece.size(), step.invert});

  std::vector<Segment> kept;
  kept.reserve(segments.size());
  switch (step.behavior) {
    case Behavior::kRemoved:
      for (const Segment& s : segments) {
        if (!s.match) kept.push_back(s);
      }
      break;
    case Behavior::kIsolated:
      kept = segments;
      break;
    case Behavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const Segment& s : segments) {
        if (s.match && !previous_match && !kept.empty()) {
          kept.back().end = s.end;
        } else {
          kept.push_back(s);
        }
        previous_match = s.match;
      }
      break;
    }
    case Behavior::kMergedWithNext: {
      bool previous_match = false;
      for (size_t i = segments.size(); i-- > 0;) {
        const Segment& s = segments[i];
        if (s.match && !previous_match && !kept.empty()) {
          kept.back().begin = s.begin;
        } else {
          kept.push_back(s);
        }
        previous_match = s.match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
    }
    case Behavior::kContiguous: {
      bool previous_match = false;
      for (const Segment& s : segments) {
        if (s.match && previous_match && !kept.empty()) {
          kept.back().end = s.end;
        } else {
          kept.push_back(s);
        }
        previous_match = s.match;
      }
      break;
    }
  }
  for (const Segment& s : kept) {
    if (s.end > s.begin) out->push_back(piece.substr(s.begin, s.end - s.begin));
  }
  return absl::OkStatus();
}

absl::Status PreTokenizer::Split(absl::string_view text, bool first_section, Pieces* out) const {
  out->views.clear();
  if (text.empty()) return absl::OkStatus();
  out->views.push_back(text);
  std::vector<absl::string_view> next;
  for (const Step& step : steps_) {
    next.clear();
    for (size_t i = 0; i < out->views.size(); ++i) {
      absl::string_view piece = out->views[i];
      switch (step.kind) {
        case Kind::kSplit:
          GANTRY_RETURN_IF_ERROR(ApplySplit(step, piece, &next));
          break;
        case Kind::kAddPrefixSpace:
          if (piece.empty() || piece[0] != ' ') {
            out->storage.push_back(absl::StrCat(" ", piece));
            piece = out->storage.back();
          }
          next.push_back(piece);
          break;
        case Kind::kMetaspace: {
          std::string replaced = absl::StrReplaceAll(piece, {{" ", step.replacement}});
          bool prepend = step.prepend == 2 || (step.prepend == 1 && first_section && i == 0);
          if (prepend && !absl::StartsWith(replaced, step.replacement)) {
            replaced.insert(0, step.replacement);
          }
          out->storage.push_back(std::move(replaced));
          if (step.split) {
            GANTRY_RETURN_IF_ERROR(ApplySplit(step, out->storage.back(), &next));
          } else {
            next.push_back(out->storage.back());
          }
          break;
        }
      }
    }
    out->views.swap(next);
  }
  return absl::OkStatus();
}

}  // namespace gantry::tokenizer
