// Identifiers that cross process boundaries: "<prefix>_<24 lowercase hex digits>"
// (96 random bits from OpenSSL's CSPRNG), e.g. "req_3f9a...", "call_...", "task_...".
// 96 bits keep the chance of a collision among 10^12 ids below 10^-4.
//
// Thread-safety: thread-safe.
#ifndef GANTRY_COMMON_IDS_H_
#define GANTRY_COMMON_IDS_H_

#include <string>

#include "absl/strings/string_view.h"

namespace gantry {

// Precondition: prefix is lowercase letters only (not checked at runtime).
std::string NewId(absl::string_view prefix);

// Whether `id` has the shape NewId(prefix) produces. Use on ids from outside.
bool IsValidId(absl::string_view id, absl::string_view prefix);

}  // namespace gantry

#endif  // GANTRY_COMMON_IDS_H_
