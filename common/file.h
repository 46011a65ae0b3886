// Reading whole files, bounded: files given to Gantry (tokenizers, templates, manifests,
// prompts) come from outside and must not make a process hold unbounded memory.
//
// Thread-safety: thread-safe.
#ifndef GANTRY_COMMON_FILE_H_
#define GANTRY_COMMON_FILE_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace gantry {

inline constexpr size_t kDefaultMaxFileBytes = size_t{256} << 20;

// The whole file. Errors: NOT_FOUND (cannot be opened, naming the path);
// INVALID_ARGUMENT when it holds more than `max_bytes` (reading stops there);
// DATA_LOSS on a read error.
absl::StatusOr<std::string> ReadFileToString(const std::string& path,
                                             size_t max_bytes = kDefaultMaxFileBytes);

}  // namespace gantry

#endif  // GANTRY_COMMON_FILE_H_
