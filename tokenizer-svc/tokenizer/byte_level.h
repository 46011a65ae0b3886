// GPT-2's byte-level alphabet: each of the 256 byte values is shown as one printable
// code point (printable Latin-1 bytes as themselves, the rest as U+0100 onwards), so
// that byte-level BPE vocabularies are valid UTF-8 text. Used by the ByteLevel
// pre-tokenizer and decoder.
//
// Thread-safety: pure functions over a constant table.
#ifndef GANTRY_TOKENIZER_SVC_TOKENIZER_BYTE_LEVEL_H_
#define GANTRY_TOKENIZER_SVC_TOKENIZER_BYTE_LEVEL_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace gantry::tokenizer {

// The code point that shows byte `b`.
uint32_t ByteLevelCodePoint(uint8_t b);

// The byte shown by `code_point`, or -1 when it is not in the alphabet.
int ByteLevelByte(uint32_t code_point);

// Appends the byte-level text of raw `bytes`.
void AppendByteLevelText(absl::string_view bytes, std::string* out);

// Appends the raw bytes of byte-level `text`. Returns false (appending nothing) when
// `text` is not valid UTF-8 or holds a code point outside the alphabet.
bool AppendByteLevelBytes(absl::string_view text, std::string* out);

}  // namespace gantry::tokenizer

#endif  // GANTRY_TOKENIZER_SVC_TOKENIZER_BYTE_LEVEL_H_
