// Test-only helpers for bundle tests: temporary directories, tiny GGUF files, file
// surgery (flip a byte, rewrite a manifest with a fresh identity).
#ifndef GANTRY_FORMATS_BUNDLE_BUNDLE_TEST_SUPPORT_H_
#define GANTRY_FORMATS_BUNDLE_BUNDLE_TEST_SUPPORT_H_

#include <string>

#include "common/json.h"

namespace gantry::bundle {

// A fresh directory under $TEST_TMPDIR (or /tmp) whose name starts with `prefix`.
std::string MakeTempDirForTest(const std::string& prefix);

// A small valid GGUF: general.architecture "qwen3", qwen3.context_length 2048, one
// tensor, a "gpt2" tokenizer model key when `with_tokenizer`, and `chat_template` as
// tokenizer.chat_template when non-empty.
void WriteTinyGgufForTest(const std::string& path, bool with_tokenizer, const std::string& chat_template);

std::string ReadFileForTest(const std::string& path);
void WriteFileForTest(const std::string& path, const std::string& data);
// XORs the byte at `offset` with 0x01.
void FlipByteForTest(const std::string& path, size_t offset);

// Writes `manifest` to dir/bundle.json with identity_sha256 recomputed, so that the
// verifier reaches the checks after the identity.
void WriteManifestWithFreshIdentityForTest(const std::string& dir, json::Value manifest);

}  // namespace gantry::bundle

#endif  // GANTRY_FORMATS_BUNDLE_BUNDLE_TEST_SUPPORT_H_
