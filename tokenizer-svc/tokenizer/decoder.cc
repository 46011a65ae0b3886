#include "tokenizer-svc/tokenizer/decoder.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/status.h"
#include "tokenizer-svc/tokenizer/byte_level.h"
#include "tokenizer-svc/tokenizer/json_fields.h"

namespace gantry::tokenizer {
namespace {

// How many bytes of a well-formed sequence start at bytes[i] (1-4, complete or not):
// the maximal subpart. *complete says whether all of it is there.
size_t MaximalSubpart(absl::string_view bytes, size_t i, bool* complete) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(bytes[k]); };
  unsigned char lead = b(i);
  *complete = true;
  if (lead < 0x80) return 1;
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 3;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 4;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
  } else {
    *complete = false;
    return 0;  // never valid as a lead byte
  }
  size_t n = 1;
  while (n < need && i + n < bytes.size()) {
    unsigned char c = b(i + n);
    if (n == 1 ? (c < lo || c > hi) : (c < 0x80 || c > 0xBF)) break;
    ++n;
  }
  *complete = n == need;
  return n;
}

bool IsByteToken(absl::string_view token, char* byte) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (token.size() != 6 || token.substr(0, 3) != "<0x" || token[5] != '>') return false;
  int hi = hex(token[3]), lo = hex(token[4]);
  if (hi < 0 || lo < 0) return false;
  *byte = static_cast<char>(hi * 16 + lo);
  return true;
}

}  // namespace

void AppendUtf8Lossy(absl::string_view bytes, std::string* out) {
  for (size_t i = 0; i < bytes.size();) {
    bool complete = false;
    size_t n = MaximalSubpart(bytes, i, &complete);
    if (complete) {
      out->append(bytes.data() + i, n);
    } else {
      out->append("\xEF\xBF\xBD");
      if (n == 0) n = 1;
    }
    i += n;
  }
}

size_t CompleteUtf8PrefixLength(absl::string_view bytes) {
  // Only the last three bytes can start an unfinished sequence.
  size_t from = bytes.size() > 3 ? bytes.size() - 3 : 0;
  for (size_t i = from; i < bytes.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c < 0xC2 || c > 0xF4) continue;  // not a lead byte
    bool complete = false;
    size_t n = MaximalSubpart(bytes, i, &complete);
    if (!complete && i + n == bytes.size()) return i;
  }
  return bytes.size();
}

absl::Status Decoder::AddSteps(const json::Value& v, const std::string& where) {
  GANTRY_ASSIGN_OR_RETURN(std::string type, TypeOf(v, where));
  Step step;
  if (type == "Sequence") {
    const json::Value* list = Member(v, "decoders");
    if (list == nullptr || !list->is_array()) return JsonError(where, "Sequence needs \"decoders\"");
    for (size_t i = 0; i < list->items().size(); ++i) {
      GANTRY_RETURN_IF_ERROR(AddSteps(list->items()[i], absl::StrCat(where, ".decoders[", i, "]")));
    }
    return absl::OkStatus();
  } else if (type == "ByteLevel") {
    step.kind = Kind::kByteLevel;
  } else if (type == "ByteFallback") {
    step.kind = Kind::kByteFallback;
  } else if (type == "Fuse") {
    step.kind = Kind::kFuse;
  } else if (type == "Replace") {
    step.kind = Kind::kReplace;
    const json::Value* pattern = Member(v, "pattern");
    const json::Value* literal = pattern == nullptr ? nullptr : Member(*pattern, "String");
    if (literal == nullptr || !literal->is_string()) {
      return absl::UnimplementedError(
          absl::StrCat("tokenizer.json: ", where, ": only String patterns are supported in decoders"));
    }
    step.pattern = literal->as_string();
    GANTRY_ASSIGN_OR_RETURN(step.content, StringOr(v, "content", "", where));
  } else if (type == "Strip") {
    step.kind = Kind::kStrip;
    GANTRY_ASSIGN_OR_RETURN(step.content, StringOr(v, "content", " ", where));
    GANTRY_ASSIGN_OR_RETURN(int64_t start, IntOr(v, "start", 0, where));
    GANTRY_ASSIGN_OR_RETURN(int64_t stop, IntOr(v, "stop", 0, where));
    if (start < 0 || stop < 0 || start > 1024 || stop > 1024) return JsonError(where, "start/stop out of range");
    step.start = static_cast<int>(start);
    step.stop = static_cast<int>(stop);
  } else if (type == "Metaspace") {
    step.kind = Kind::kMetaspace;
    GANTRY_ASSIGN_OR_RETURN(step.pattern, StringOr(v, "replacement", "\xE2\x96\x81", where));
    GANTRY_ASSIGN_OR_RETURN(bool add_prefix_space, BoolOr(v, "add_prefix_space", true, where));
    GANTRY_ASSIGN_OR_RETURN(std::string scheme,
                            StringOr(v, "prepend_scheme", add_prefix_space ? "always" : "never", where));
    step.strip_first_space = scheme != "never";
  } else {
    return absl::UnimplementedError(
        absl::StrCat("tokenizer.json: ", where, ": decoder type '", type, "' is not supported"));
  }
  steps_.push_back(std::move(step));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Decoder>> Decoder::FromJson(const json::Value& v) {
  std::unique_ptr<Decoder> decoder(new Decoder());
  if (v.is_null()) {
    decoder->join_with_space_ = true;
    return decoder;
  }
  GANTRY_RETURN_IF_ERROR(decoder->AddSteps(v, "decoder"));
  return decoder;
}

std::string Decoder::DecodeToBytes(std::vector<DecodePiece> pieces) const {
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Kind::kByteLevel:
        for (DecodePiece& piece : pieces) {
          if (piece.added) continue;
          std::string bytes;
          if (AppendByteLevelBytes(piece.text, &bytes)) piece.text = std::move(bytes);
        }
        break;
      case Kind::kReplace:
        if (step.pattern.empty()) break;
        for (DecodePiece& piece : pieces) {
          piece.text = absl::StrReplaceAll(piece.text, {{step.pattern, step.content}});
        }
        break;
      case Kind::kByteFallback: {
        std::vector<DecodePiece> out;
        out.reserve(pieces.size());
        bool last_was_byte = false;
        for (DecodePiece& piece : pieces) {
          char byte = 0;
          if (IsByteToken(piece.text, &byte)) {
            if (!last_was_byte) out.push_back(DecodePiece{std::string(), false});
            out.back().text.push_back(byte);
            last_was_byte = true;
          } else {
            out.push_back(std::move(piece));
            last_was_byte = false;
          }
        }
        pieces = std::move(out);
        break;
      }
      case Kind::kFuse: {
        DecodePiece fused;
        for (const DecodePiece& piece : pieces) fused.text += piece.text;
        pieces.clear();
        pieces.push_back(std::move(fused));
        break;
      }
      case Kind::kStrip:
        if (step.content.empty()) break;
        for (DecodePiece& piece : pieces) {
          absl::string_view text = piece.text;
          for (int i = 0; i < step.start && absl::StartsWith(text, step.content); ++i) {
            text.remove_prefix(step.content.size());
          }
          for (int i = 0; i < step.stop && absl::EndsWith(text, step.content); ++i) {
            text.remove_suffix(step.content.size());
          }
          piece.text = std::string(text);
        }
        break;
      case Kind::kMetaspace:
        for (size_t i = 0; i < pieces.size(); ++i) {
          if (!step.pattern.empty()) {
            pieces[i].text = absl::StrReplaceAll(pieces[i].text, {{step.pattern, " "}});
          }
          if (i == 0 && step.strip_first_space && absl::StartsWith(pieces[i].text, " ")) {
            pieces[i].text.erase(0, 1);
          }
        }
        break;
    }
  }
  std::string out;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (join_with_space_ && i > 0) out.push_back(' ');
    out += pieces[i].text;
  }
  return out;
}

}  // namespace gantry::tokenizer
