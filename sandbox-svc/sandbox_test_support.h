// Test-only helpers for the sandbox tests: root check, workspaces, calls, tallies.
#ifndef GANTRY_SANDBOX_SVC_SANDBOX_TEST_SUPPORT_H_
#define GANTRY_SANDBOX_SVC_SANDBOX_TEST_SUPPORT_H_

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "gantry/v1/tool.pb.h"
#include "sandbox-svc/executable_resolver.h"

namespace gantry::sandbox::testing {

// The owner given to test workspaces (a uid no real account uses).
inline constexpr uid_t kTestUid = 4242;
inline constexpr gid_t kTestGid = 4242;

// Whether this process is root; when not, records a test failure that says why: the
// sandbox tests must not pass silently where the isolation cannot be fully exercised.
bool RequireRoot();

// A fresh directory $TEST_TMPDIR/<name> owned by kTestUid (recursively after `files`
// are written: each pair is a relative path and its content).
std::string MakeWorkspace(const std::string& name,
                          const std::vector<std::pair<std::string, std::string>>& files = {},
                          uid_t uid = kTestUid);

// A ToolCall for exec of `argv` in `workspace`.
v1::ToolCall ExecCall(const std::string& workspace, const std::vector<std::string>& argv);

// A resolver without a file system, for the pure rule tests: a bare name is
// /usr/bin/<name>, "./x" and "dir/x" are under the cwd, then one step through `links`;
// a path containing "missing" is NOT_FOUND.
class FakeResolver : public ExecutableResolver {
 public:
  absl::StatusOr<std::string> Resolve(absl::string_view name,
                                      absl::string_view cwd) const override;
  std::map<std::string, std::string> links = {{"/usr/bin/python3", "/usr/bin/python3.11"},
                                              {"/workspace/cat", "/usr/bin/rm"}};
};

// The text of an access policy (docs/policy.md) in which user `principal` is granted
// each of `executables` (absolute paths) without further rules; `extra` is appended.
std::string PolicyGranting(const std::string& principal,
                           const std::vector<std::string>& executables,
                           const std::string& extra = "");

// Reads a host file ("" when missing).
std::string ReadHostFile(const std::string& path);
bool HostPathExists(const std::string& path);

// Number of live (not zombie) processes owned by `uid` on the host; prints each.
int CountProcessesOf(uid_t uid);

// Counts attempts and successful escapes of one escape test and prints
// "ESCAPE <name>: attempts=N successes=M" when it goes out of scope.
class EscapeTally {
 public:
  explicit EscapeTally(std::string name) : name_(std::move(name)) {}
  ~EscapeTally();
  // Records one attempt; `escaped` true means the isolation failed.
  void Attempt(bool escaped, const std::string& what);
  int successes() const { return successes_; }

 private:
  std::string name_;
  int attempts_ = 0;
  int successes_ = 0;
};

}  // namespace gantry::sandbox::testing

#endif  // GANTRY_SANDBOX_SVC_SANDBOX_TEST_SUPPORT_H_
