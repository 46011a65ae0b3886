// Where a ToolCall's workspace may be when the caller is not trusted to choose it
// (docs/sandbox.md, "Service"): strictly beneath a configured root, reached through
// directories that no user but root (or the service's own user) can change, and never
// run as uid or gid 0.
//
// Why the path must be safe, not only beneath a root: the isolation opens the workspace
// by path again when it runs the call; a user who could rename a directory on that path
// could swap it for a link to another user's files between this check and that open.
//
// Thread-safety: thread-safe (no shared state).
#ifndef GANTRY_SANDBOX_SVC_WORKSPACE_ROOTS_H_
#define GANTRY_SANDBOX_SVC_WORKSPACE_ROOTS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace gantry::sandbox {

// Checks the workspace `real` (absolute, symlinks already resolved by realpath) against
// `roots` (absolute directories, resolved again here). The path is walked from "/" one
// component at a time without following links (O_PATH | O_NOFOLLOW); at each step the
// parent directory must be owned by root or this process's user and writable by no one
// else, or be sticky (like /tmp) with the entry owned by root or this process's user.
// The opened directory must still be `real` at the end. With `roots` empty only the
// last rule applies. When this process is root the call would run as the workspace's
// owner (isolation.h, ChoosePrivilegeDrop), or as the fallback ids when root owns it:
// neither may be uid or gid 0.
// Errors: PERMISSION_DENIED sandbox_workspace_outside_roots (beneath no root, a root
// itself, or a path that changed while it was walked); PERMISSION_DENIED
// sandbox_workspace_unsafe (a directory on the path that another user can change; a
// call that would run with uid or gid 0).
absl::Status CheckWorkspace(const std::string& real, const std::vector<std::string>& roots,
                            uid_t fallback_uid, gid_t fallback_gid);

}  // namespace gantry::sandbox

#endif  // GANTRY_SANDBOX_SVC_WORKSPACE_ROOTS_H_
