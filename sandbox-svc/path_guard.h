// Workspace paths from tool-call arguments: lexical checks, symlink-safe resolution and
// grant globs.
//
// A tool path is relative to the workspace root (a leading "/" is taken as the root
// too). It is resolved component by component on the host, following symlinks the way
// the sandbox would see them (an absolute target is read relative to the sandbox root,
// which holds the workspace at /workspace and nothing else of the host that could be
// written); every step must stay inside the workspace. The sandbox's mounts enforce the
// same boundary a second time, so a race that swaps a symlink after the check still
// meets a read-only or absent path.
//
// Thread-safety: all functions are thread-safe.
#ifndef GANTRY_SANDBOX_SVC_PATH_GUARD_H_
#define GANTRY_SANDBOX_SVC_PATH_GUARD_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gantry::sandbox {

// Splits `path` into normalised components: "." dropped, ".." pops (an error when it
// would leave the root), empty components dropped.
// Errors: PERMISSION_DENIED ("path escapes the workspace"), INVALID_ARGUMENT for a NUL
// byte or a path longer than 4096 bytes.
absl::StatusOr<std::vector<std::string>> SplitToolPath(absl::string_view path);

// Resolves `path` inside the resolved workspace `workspace_root` (absolute, no
// symlinks). Returns the path relative to the workspace ("" is the root) with every
// existing symlink followed; a missing final part is kept as written.
// Errors: PERMISSION_DENIED when any step leaves the workspace (also through a
// symlink), INVALID_ARGUMENT as SplitToolPath, FAILED_PRECONDITION after 40 links.
absl::StatusOr<std::string> ResolveInWorkspace(const std::string& workspace_root,
                                               absl::string_view path);

// Glob match over "/"-separated relative paths: "*" and "?" within a component,
// "[...]" classes, "**" as a whole component matches zero or more components.
// A pattern "dir/**" thus matches "dir" itself and everything below it.
bool GlobMatch(absl::string_view pattern, absl::string_view path);

// Whether `rel` (resolved, relative) matches one of `globs`.
bool MatchesAny(const std::vector<std::string>& globs, absl::string_view rel);

}  // namespace gantry::sandbox

#endif  // GANTRY_SANDBOX_SVC_PATH_GUARD_H_
