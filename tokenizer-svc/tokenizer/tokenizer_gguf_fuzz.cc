// Fuzz target: a GGUF's tokenizer.ggml.* metadata turned into a tokenizer (outside
// bytes: a bundle's model file). Invariant: neither the GGUF reader nor FromGguf
// (byte-level or SentencePiece, merges rebuilt from scores) crashes, whatever the
// file; what they accept can encode, decode and stream-decode a fixed text.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "formats/gguf/gguf.h"
#include "tokenizer-svc/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gantry;
  auto file = gguf::GgufFile::FromBytes(absl::string_view(reinterpret_cast<const char*>(data), size));
  if (!file.ok()) return 0;
  auto tokenizer = tokenizer::Tokenizer::FromGguf(**file);
  if (!tokenizer.ok()) return 0;
  for (int mode = 0; mode < 4; ++mode) {
    tokenizer::EncodeOptions options;
    options.add_special = mode & 1;
    options.split_special = mode & 2;
    auto ids = (*tokenizer)->Encode("Hello <s>  w\xC3\xB6rld\n\n 12345 \xE2\x82\xAC e\xCC\x81 abc ab", options);
    if (!ids.ok()) continue;
    (void)(*tokenizer)->Decode(*ids);
    tokenizer::StreamDecoder stream(tokenizer->get(), false);
    for (int32_t id : *ids) (void)stream.Push(id);
    (void)stream.Finish();
  }
  return 0;
}
