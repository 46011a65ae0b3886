// Test tool: spm_test_gguf_tool TOKENIZER_DIR OUT.gguf writes the tokenizer-only GGUF of
// spm_test_gguf.h (a SentencePiece tokenizer.json as llama.cpp's converter stores it).
#include <cstdio>

#include "tokenizer-svc/tokenizer/spm_test_gguf.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: spm_test_gguf_tool TOKENIZER_DIR OUT.gguf\n");
    return 2;
  }
  absl::Status status = gantry::tokenizer::WriteSentencePieceGgufForTest(argv[1], argv[2]);
  if (!status.ok()) {
    std::fprintf(stderr, "spm_test_gguf: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
