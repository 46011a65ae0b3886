// Fuzz target: loading tokenizer.json (outside bytes: a bundle's file). Invariant:
// FromJson never crashes, whatever it is given; what it accepts can encode and decode
// a fixed text without crashing (errors are fine: ids of a hostile template may be
// unknown to the vocabulary).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "tokenizer-svc/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gantry::tokenizer;
  absl::string_view text(reinterpret_cast<const char*>(data), size);
  auto tokenizer = Tokenizer::FromJson(text, "");
  if (!tokenizer.ok()) return 0;
  for (int mode = 0; mode < 4; ++mode) {
    EncodeOptions options;
    options.add_special = mode & 1;
    options.split_special = mode & 2;
    auto ids = (*tokenizer)->Encode("Hello <|im_start|>  wörld\n\n 12345 \xE2\x82\xAC e\xCC\x81 hello", options);
    if (!ids.ok()) continue;
    (void)(*tokenizer)->Decode(*ids);
    StreamDecoder stream(tokenizer->get(), false);
    for (int32_t id : *ids) (void)stream.Push(id);
    (void)stream.Finish();
  }
  return 0;
}
