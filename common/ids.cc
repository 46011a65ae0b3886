#include "common/ids.h"

#include <openssl/rand.h>

#include <cstdlib>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace gantry {

constexpr int kRandomBytes = 12;

std::string NewId(absl::string_view prefix) {
  unsigned char bytes[kRandomBytes];
  if (RAND_bytes(bytes, kRandomBytes) != 1) {
    // OpenSSL cannot seed its CSPRNG: ids would no longer be unique; nothing safe to do.
    std::abort();
  }
  return absl::StrCat(prefix, "_",
                      absl::BytesToHexString(absl::string_view(
                          reinterpret_cast<const char*>(bytes), kRandomBytes)));
}

bool IsValidId(absl::string_view id, absl::string_view prefix) {
  if (id.size() != prefix.size() + 1 + 2 * kRandomBytes) return false;
  if (id.substr(0, prefix.size()) != prefix || id[prefix.size()] != '_') return false;
  for (char c : id.substr(prefix.size() + 1)) {
    bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
    if (!hex) return false;
  }
  return true;
}

}  // namespace gantry
