// Resolves argv[0] to the real executable as the sandbox will see it.
//
// The sandbox's file system is a fixed view of the host (isolation.h): /usr, the
// top-level /bin, /lib* links, a few /etc entries and the workspace at /workspace.
// Resolution walks that view component by component, reading symlinks with the
// sandbox's root (so a link in the workspace that points at "/usr/bin/curl" resolves
// to /usr/bin/curl, and one that points at "/home/..." resolves to nothing), searches
// kSandboxPath for a bare name like execvp, and returns the final absolute path with
// every link followed ("/usr/bin/python3" -> "/usr/bin/python3.11"). MultiCallKind
// tells the rule engine when the resolved file is git or busybox, whose behaviour
// depends on the name it is run under (argv[0]), not on the file. ResolveOperand reads
// a command's operands through the same view, so that operand globs see where an
// operand really leads (docs/sandbox.md, "Command rules").
//
// Thread-safety: Resolve is const and thread-safe.
#ifndef GANTRY_SANDBOX_SVC_EXECUTABLE_RESOLVER_H_
#define GANTRY_SANDBOX_SVC_EXECUTABLE_RESOLVER_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "policy/policy_types.h"

namespace gantry::sandbox {

class ExecutableResolver {
 public:
  virtual ~ExecutableResolver() = default;
  // `name`: argv[0] as given; `cwd`: absolute working directory inside the sandbox.
  // Returns the absolute path of a regular, executable file inside the sandbox.
  // Errors: NOT_FOUND (nothing executable by that name in the sandbox).
  virtual absl::StatusOr<std::string> Resolve(absl::string_view name,
                                              absl::string_view cwd) const = 0;
  // Which multi-call binary the resolved file `resolved` is, if any: "git" (git-<cmd>
  // names run `git <cmd>`) or "busybox" (the name chooses the applet); "" for none.
  // The default goes by the file's name (.../git, .../busybox).
  virtual std::string MultiCallKind(absl::string_view resolved) const;
  // Where operand `operand` (as written; a relative one against the absolute `cwd`)
  // leads in the sandbox, for operand globs (policy::OperandPath). The default knows no
  // file system and returns {}: the lexical path alone decides.
  virtual policy::OperandPath ResolveOperand(absl::string_view cwd,
                                             absl::string_view operand) const;
};

// The real view. `host_workspace` is the resolved host path of /workspace ("" when
// none: then /workspace resolves to nothing).
class SandboxViewResolver : public ExecutableResolver {
 public:
  explicit SandboxViewResolver(std::string host_workspace)
      : host_workspace_(std::move(host_workspace)) {}
  absl::StatusOr<std::string> Resolve(absl::string_view name,
                                      absl::string_view cwd) const override;
  // Follows every link of an absolute sandbox path; NOT_FOUND when it leaves the view
  // or does not exist.
  absl::StatusOr<std::string> RealPath(absl::string_view sandbox_path) const;
  // By name, or by inode: a file that is the same inode as the sandbox's git or busybox
  // (a hard link under another name) is that binary.
  std::string MultiCallKind(absl::string_view resolved) const override;
  // Walks cwd/operand as the kernel would, following every link in the view. An
  // existing path: its real path. A path that does not exist (an output file, a new
  // directory, or one outside the view, which does not exist in the sandbox): its
  // deepest existing directory's real path joined with the rest. Denied: a dangling
  // link (what it names does not exist, or lies outside the view: a link made later
  // could point anywhere), more than 40 links, and a path into the sandbox's own /tmp
  // or /dev, or /workspace without a workspace, which this view cannot see.
  policy::OperandPath ResolveOperand(absl::string_view cwd,
                                     absl::string_view operand) const override;

 private:
  enum class Walked { kFound, kMissing, kDangling, kUnseen, kTooManyLinks };
  // The walk shared by RealPath and ResolveOperand; `*real` as ResolveOperand says
  // (with kUnseen, the directory it cannot see).
  Walked Walk(absl::string_view sandbox_path, std::string* real) const;

  std::string host_workspace_;
};

}  // namespace gantry::sandbox

#endif  // GANTRY_SANDBOX_SVC_EXECUTABLE_RESOLVER_H_
