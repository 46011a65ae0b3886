// Fuzz target: encoding untrusted text with the tiny tokenizers (the same pipelines as
// Qwen 3 and Mistral). Input: one selector byte (bit 0: SentencePiece-style instead of
// byte-level; bit 1: add_special; bit 2: split_special; bit 3: every special token's
// text a literal range, as for client text in a prompt), then the text.
// Invariants: valid UTF-8 always encodes and the ids always decode; invalid UTF-8 is
// an error, not a crash; the byte-level tokenizer with specials as text round-trips to
// NFC(text); a StreamDecoder never emits invalid UTF-8 and its output concatenates to
// Decode(ids); literal ranges over every special token's text make no special id; a
// limit of max_ids (bits 4-7: the count minus 0..15) refuses exactly the texts with more
// ids than it (OUT_OF_RANGE) and changes no ids of the others.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>

#include "common/utf8.h"
#include "tokenizer-svc/tokenizer/tiny_tokenizers.h"
#include "tokenizer-svc/tokenizer/tokenizer.h"

namespace {

using gantry::tokenizer::Tokenizer;

const Tokenizer* Get(bool sentence_piece) {
  static const Tokenizer* byte_level =
      Tokenizer::FromJson(gantry::tokenizer::TinyByteLevelTokenizerJson(), "")->release();
  static const Tokenizer* sp =
      Tokenizer::FromJson(gantry::tokenizer::TinySentencePieceTokenizerJson(), "")->release();
  return sentence_piece ? sp : byte_level;
}

std::string Nfc(const std::string& s) {
  UErrorCode status = U_ZERO_ERROR;
  std::string out;
  icu::StringByteSink<std::string> sink(&out);
  icu::Normalizer2::getNFCInstance(status)->normalizeUTF8(0, s, sink, nullptr, status);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gantry::tokenizer;
  if (size == 0) return 0;
  const uint8_t selector = data[0];
  std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  const Tokenizer* tokenizer = Get(selector & 1);
  EncodeOptions options;
  options.add_special = selector & 2;
  options.split_special = selector & 4;
  if (selector & 8) options.literal_ranges = tokenizer->FindSpecialText(text);
  auto ids = tokenizer->Encode(text, options);
  bool valid = gantry::IsValidUtf8(text);
  if (ids.ok() != valid) std::abort();
  if (!valid) return 0;
  auto decoded = tokenizer->Decode(*ids);
  if (!decoded.ok() || !gantry::IsValidUtf8(*decoded)) std::abort();
  if (!(selector & 1) && options.split_special && *decoded != Nfc(text)) std::abort();
  if (selector & 8) {
    for (const auto& [begin, end] : options.literal_ranges) {
      if (begin >= end || end > text.size()) std::abort();
    }
    for (int32_t id : *ids) {
      // Post-processor BOS/EOS are the only special ids allowed.
      if (tokenizer->IsSpecial(id) && !options.add_special) std::abort();
    }
  }
  {
    EncodeOptions limited = options;
    const size_t below = selector >> 4;
    if (ids->size() > below) {
      limited.max_ids = ids->size() - below;
      auto again = tokenizer->Encode(text, limited);
      if (below == 0 ? !(again.ok() && *again == *ids) : !absl::IsOutOfRange(again.status())) {
        std::abort();
      }
    }
  }
  StreamDecoder stream(tokenizer, false);
  std::string streamed;
  for (int32_t id : *ids) {
    auto piece = stream.Push(id);
    if (!piece.ok() || !gantry::IsValidUtf8(*piece)) std::abort();
    streamed += *piece;
  }
  streamed += stream.Finish();
  if (streamed != *decoded) std::abort();
  return 0;
}
