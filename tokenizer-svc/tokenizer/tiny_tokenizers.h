// Small, hand-made tokenizer.json texts for unit tests and fuzz targets: the same
// pipelines as the real files (Qwen-style byte-level BPE, Gemma/Mistral-style BPE with
// byte fallback) over vocabularies of a few hundred tokens, so that tests need no
// reference data and fuzzers load in microseconds.
//
// Thread-safety: pure functions.
#ifndef GANTRY_TOKENIZER_SVC_TOKENIZER_TINY_TOKENIZERS_H_
#define GANTRY_TOKENIZER_SVC_TOKENIZER_TINY_TOKENIZERS_H_

#include <string>

namespace gantry::tokenizer {

// Byte-level BPE: NFC, Qwen's split pattern, ByteLevel; the 256 byte symbols (ids
// 0-255 in byte order), merges building "Ġt", "he", "Ġthe", "in", "Ġin"; added tokens
// <|im_start|> (special) and <tool_call> (not special), <|l|> (special, lstrip) and
// <|r|> (special, rstrip), <w> (not special, single_word).
std::string TinyByteLevelTokenizerJson();

// SentencePiece-style BPE: Prepend + Replace(" ", "▁") normalizer, byte fallback
// <0x00>..<0xFF> (ids 3-258), <unk>=0 <s>=1 </s>=2, a few letters and merges, BOS
// template, decoder Replace/ByteFallback/Fuse/Strip as in Mistral's file.
std::string TinySentencePieceTokenizerJson();

}  // namespace gantry::tokenizer

#endif  // GANTRY_TOKENIZER_SVC_TOKENIZER_TINY_TOKENIZERS_H_
