#include "tokenizer-svc/tokenizer/normalizer.h"

#include <unicode/bytestream.h>
#include <unicode/casemap.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "common/utf8.h"
#include "tokenizer-svc/tokenizer/json_fields.h"

namespace gantry::tokenizer {
namespace {

absl::Status IcuError(UErrorCode code, absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ICU error ", u_errorName(code)));
}

absl::Status ApplyNormalForm(const icu::Normalizer2* form, std::string* text) {
  UErrorCode status = U_ZERO_ERROR;
  if (form->isNormalizedUTF8(*text, status) && U_SUCCESS(status)) return absl::OkStatus();
  status = U_ZERO_ERROR;
  std::string out;
  out.reserve(text->size());
  icu::StringByteSink<std::string> sink(&out);
  form->normalizeUTF8(0, *text, sink, nullptr, status);
  if (U_FAILURE(status)) return IcuError(status, "unicode normalization");
  *text = std::move(out);
  return absl::OkStatus();
}

bool IsWhiteSpace(uint32_t cp) { return u_isUWhiteSpace(static_cast<UChar32>(cp)); }

}  // namespace

absl::Status Pattern::FindAll(absl::string_view text,
                              std::vector<std::pair<size_t, size_t>>* matches) const {
  if (regex != nullptr) return regex->FindAll(text, matches);
  if (literal.empty()) return absl::OkStatus();
  for (size_t pos = text.find(literal); pos != absl::string_view::npos;
       pos = text.find(literal, pos + literal.size())) {
    matches->emplace_back(pos, pos + literal.size());
  }
  return absl::OkStatus();
}

absl::StatusOr<Pattern> ParsePattern(const json::Value& v, absl::string_view where) {
  Pattern pattern;
  if (const json::Value* s = Member(v, "String"); s != nullptr && s->is_string()) {
    pattern.literal = s->as_string();
    return pattern;
  }
  if (const json::Value* r = Member(v, "Regex"); r != nullptr && r->is_string()) {
    auto regex = Regex::Compile(r->as_string());
    if (!regex.ok()) return JsonError(where, regex.status().message());
    pattern.regex = std::move(regex).value();
    return pattern;
  }
  return JsonError(where, "expected {\"String\": ...} or {\"Regex\": ...}");
}

absl::Status Normalizer::AddSteps(const json::Value& v, absl::string_view where,
                                  std::vector<Step>* steps) {
  GANTRY_ASSIGN_OR_RETURN(std::string type, TypeOf(v, where));
  Step step;
  if (type == "Sequence") {
    const json::Value* list = Member(v, "normalizers");
    if (list == nullptr || !list->is_array()) return JsonError(where, "Sequence needs \"normalizers\"");
    for (size_t i = 0; i < list->items().size(); ++i) {
      GANTRY_RETURN_IF_ERROR(
          AddSteps(list->items()[i], absl::StrCat(where, ".normalizers[", i, "]"), steps));
    }
    return absl::OkStatus();
  } else if (type == "NFC") {
    step.kind = Kind::kNfc;
  } else if (type == "NFD") {
    step.kind = Kind::kNfd;
  } else if (type == "NFKC") {
    step.kind = Kind::kNfkc;
  } else if (type == "NFKD") {
    step.kind = Kind::kNfkd;
  } else if (type == "Lowercase") {
    step.kind = Kind::kLowercase;
  } else if (type == "Replace") {
    step.kind = Kind::kReplace;
    const json::Value* pattern = Member(v, "pattern");
    if (pattern == nullptr) return JsonError(where, "Replace needs \"pattern\"");
    GANTRY_ASSIGN_OR_RETURN(step.pattern, ParsePattern(*pattern, absl::StrCat(where, ".pattern")));
    GANTRY_ASSIGN_OR_RETURN(step.content, StringOr(v, "content", "", where));
  } else if (type == "Prepend") {
    step.kind = Kind::kPrepend;
    GANTRY_ASSIGN_OR_RETURN(step.content, StringOr(v, "prepend", "", where));
  } else if (type == "Strip") {
    step.kind = Kind::kStrip;
    GANTRY_ASSIGN_OR_RETURN(step.left, BoolOr(v, "strip_left", false, where));
    GANTRY_ASSIGN_OR_RETURN(step.right, BoolOr(v, "strip_right", false, where));
  } else {
    return absl::UnimplementedError(
        absl::StrCat("tokenizer.json: ", where, ": normalizer type '", type, "' is not supported"));
  }
  steps->push_back(std::move(step));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Normalizer>> Normalizer::FromJson(const json::Value& v) {
  std::unique_ptr<Normalizer> normalizer(new Normalizer());
  GANTRY_RETURN_IF_ERROR(AddSteps(v, "normalizer", &normalizer->steps_));
  return normalizer;
}

size_t Normalizer::MaxShrink() const {
  size_t factor = 1;
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Kind::kNfc:
      case Kind::kNfd:
      case Kind::kLowercase:
        factor *= 3;
        break;
      case Kind::kNfkc:
      case Kind::kNfkd:
        factor *= 4;
        break;
      case Kind::kPrepend:
        break;
      case Kind::kReplace:
      case Kind::kStrip:
        return 0;
    }
  }
  return factor;
}

absl::Status Normalizer::Normalize(std::string* text) const {
  for (const Step& step : steps_) {
    UErrorCode status = U_ZERO_ERROR;
    switch (step.kind) {
      case Kind::kNfc:
        GANTRY_RETURN_IF_ERROR(ApplyNormalForm(icu::Normalizer2::getNFCInstance(status), text));
        break;
      case Kind::kNfd:
        GANTRY_RETURN_IF_ERROR(ApplyNormalForm(icu::Normalizer2::getNFDInstance(status), text));
        break;
      case Kind::kNfkc:
        GANTRY_RETURN_IF_ERROR(ApplyNormalForm(icu::Normalizer2::getNFKCInstance(status), text));
        break;
      case Kind::kNfkd:
        GANTRY_RETURN_IF_ERROR(ApplyNormalForm(icu::Normalizer2::getNFKDInstance(status), text));
        break;
      case Kind::kLowercase: {
        std::string out;
        icu::StringByteSink<std::string> sink(&out);
        icu::CaseMap::utf8ToLower("", 0, *text, sink, nullptr, status);
        if (U_FAILURE(status)) return IcuError(status, "lowercase");
        *text = std::move(out);
        break;
      }
      case Kind::kReplace: {
        std::vector<std::pair<size_t, size_t>> matches;
        GANTRY_RETURN_IF_ERROR(step.pattern.FindAll(*text, &matches));
        if (matches.empty()) break;
        std::string out;
        size_t last = 0;
        for (const auto& [begin, end] : matches) {
          out.append(*text, last, begin - last);
          out += step.content;
          last = end;
        }
        out.append(*text, last, std::string::npos);
        *text = std::move(out);
        break;
      }
      case Kind::kPrepend:
        if (!text->empty()) text->insert(0, step.content);
        break;
      case Kind::kStrip: {
        size_t begin = 0, end = text->size();
        if (step.left) {
          while (begin < end) {
            uint32_t cp = 0;
            size_t n = Utf8SequenceLength(*text, begin, &cp);
            if (n == 0 || !IsWhiteSpace(cp)) break;
            begin += n;
          }
        }
        if (step.right) {
          while (end > begin) {
            size_t start = end - 1;
            while (start > begin && (static_cast<unsigned char>((*text)[start]) & 0xC0) == 0x80) --start;
            uint32_t cp = 0;
            if (Utf8SequenceLength(*text, start, &cp) == 0 || !IsWhiteSpace(cp)) break;
            end = start;
          }
        }
        *text = text->substr(begin, end - begin);
        break;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace gantry::tokenizer
