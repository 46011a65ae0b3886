#include "common/file.h"

#include <cstdio>
#include <memory>

#include "absl/strings/str_cat.h"

namespace gantry {

absl::StatusOr<std::string> ReadFileToString(const std::string& path, size_t max_bytes) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::string data;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), f.get())) > 0) {
    data.append(buffer, n);
    if (data.size() > max_bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " is larger than the limit of ", max_bytes, " bytes"));
    }
  }
  if (std::ferror(f.get())) return absl::DataLossError(absl::StrCat("read error in ", path));
  return data;
}

}  // namespace gantry
