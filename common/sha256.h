// SHA-256 through OpenSSL's EVP interface, as lowercase hex.
//
// Thread-safety: a Sha256 object is not thread-safe; the free functions are.
#ifndef GANTRY_COMMON_SHA256_H_
#define GANTRY_COMMON_SHA256_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

typedef struct evp_md_ctx_st EVP_MD_CTX;

namespace gantry {

// Incremental hashing. Update() any number of times, then HexDigest() once.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(absl::string_view bytes);
  // 64 lowercase hex digits. The object must not be used afterwards.
  std::string HexDigest();

 private:
  EVP_MD_CTX* ctx_;
};

// SHA-256 of `bytes`, 64 lowercase hex digits.
std::string Sha256Hex(absl::string_view bytes);

// SHA-256 of token ids, each as 4 bytes little-endian, in order: how a prompt's
// tokens are identified in evidence and by the tokenizer service (router and worker hash the same way):
// TokenizerResponse.ids_sha256, Usage.prompt_ids_sha256.
std::string TokenIdsSha256Hex(const std::vector<int32_t>& ids);

// SHA-256 of a file's contents, read in 1 MiB blocks. `progress`, when given, is called
// after each block with (bytes hashed so far, file size).
// Errors: NOT_FOUND / PERMISSION_DENIED / DATA_LOSS (read error), naming the path.
absl::StatusOr<std::string> Sha256File(
    const std::string& path,
    const std::function<void(uint64_t, uint64_t)>& progress = nullptr);

}  // namespace gantry

#endif  // GANTRY_COMMON_SHA256_H_
