#include "common/sha256.h"

#include <openssl/evp.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace gantry {


// EVP calls only fail on allocation failure or a broken OpenSSL build; both are
// unrecoverable programming-environment errors, so they are not threaded through.
Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr);
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_); }

void Sha256::Update(absl::string_view bytes) {
  EVP_DigestUpdate(ctx_, bytes.data(), bytes.size());
}

std::string Sha256::HexDigest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(ctx_, digest, &n);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), n));
}

std::string TokenIdsSha256(const std::vector<int32_t>& ids) {
  std::string bytes;
  bytes.reserve(ids.size() * 4);
  for (int32_t id : ids) {
    const uint32_t u = static_cast<uint32_t>(id);
    for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>((u >> (8 * i)) & 0xFF));
  }
  return Sha256Hex(bytes);
}

std::string Sha256Hex(absl::string_view bytes) {
  Sha256 hash;
  hash.Update(bytes);
  return hash.HexDigest();
}

absl::StatusOr<std::string> Sha256File(
    const std::string& path, const std::function<void(uint64_t, uint64_t)>& progress) {
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) {
    int err = errno;
    std::string message = absl::StrCat("cannot open ", path, ": ", std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(message);
    if (err == EACCES) return absl::PermissionDeniedError(message);
    return absl::UnavailableError(message);
  }
  uint64_t size = 0;
  if (std::fseek(file.get(), 0, SEEK_END) == 0) {
    long end = std::ftell(file.get());
    if (end > 0) size = static_cast<uint64_t>(end);
    std::rewind(file.get());
  }
  Sha256 hash;
  std::vector<char> block(1 << 20);
  uint64_t done = 0;
  for (;;) {
    size_t n = std::fread(block.data(), 1, block.size(), file.get());
    if (n > 0) {
      hash.Update(absl::string_view(block.data(), n));
      done += n;
      if (progress) progress(done, size);
    }
    if (n < block.size()) {
      if (std::ferror(file.get())) {
        return absl::DataLossError(absl::StrCat("read error in ", path));
      }
      break;
    }
  }
  return hash.HexDigest();
}

}  // namespace gantry
