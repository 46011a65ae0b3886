// Loads an access-policy YAML file (schema: docs/policy.md) into an immutable Snapshot.
//
// Loading is all or nothing: the text is parsed strictly (unknown keys, duplicate keys,
// wrong types, aliases, references to unknown groups, principals or models are errors),
// compiled into per-principal effective grants, and then every inline example in the
// file is decided; a single failing example fails the load. Only a snapshot that passed
// all of this is ever returned, so a caller can swap it in without further checks.
//
// Errors are INVALID_ARGUMENT with a message "FILE:LINE:COLUMN: YAML.PATH: what was
// expected, got what" (several lines when several examples fail); reading the file
// fails with NOT_FOUND / PERMISSION_DENIED / DATA_LOSS. Nothing in the input can make
// the loader crash, abort or throw.
//
// Thread-safety: the functions are pure and may run concurrently.
#ifndef GANTRY_POLICY_POLICY_LOADER_H_
#define GANTRY_POLICY_POLICY_LOADER_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "policy/policy_types.h"

namespace gantry::policy {

// Files larger than this are refused before parsing.
constexpr size_t kMaxPolicyBytes = 4 << 20;

// Loads `text`; `source` names it in messages (usually the file's base name).
// The snapshot's hash is the SHA-256 of `text`.
absl::StatusOr<std::shared_ptr<const Snapshot>> LoadPolicyText(absl::string_view text,
                                                               absl::string_view source);

// Reads and loads the file at `path`; messages name its base name.
absl::StatusOr<std::shared_ptr<const Snapshot>> LoadPolicyFile(const std::string& path);

// Decides every inline example of `snapshot`. OK when all hold; otherwise
// INVALID_ARGUMENT listing each failure on its own line. LoadPolicy* already does this.
absl::Status RunPolicyExamples(const Snapshot& snapshot);

}  // namespace gantry::policy

#endif  // GANTRY_POLICY_POLICY_LOADER_H_
