// Task manifests: what one agent task may do, and how its result is judged
// (docs/tasks.md is the reference for every key).
//
// A manifest is outside input: it is parsed strictly. Unknown keys, duplicate keys,
// aliases, wrong types, values out of range and missing required keys are errors of
// the form
//   task.yaml:12:5: budget.max_tool_calls: expected an integer in [0, 100000], got 'ten'
// (1-based line and column of the offending node, then its YAML path). Nothing in a
// manifest can widen what the harness's own policy grants: the manifest only narrows.
//
// Thread-safety: the functions are pure; a TaskManifest is a plain value.
#ifndef GANTRY_HARNESS_SVC_MANIFEST_H_
#define GANTRY_HARNESS_SVC_MANIFEST_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "policy/policy_types.h"

namespace gantry::harness {

// The tools the harness can advertise; each maps onto the sandbox's built-in tool of
// the same name (docs/sandbox.md, "Tools").
inline constexpr const char* kBuiltinTools[] = {"read_file", "list_dir", "glob", "grep", "exec",
                                                "delegate_task"};

struct ModelSpec {
  std::string name;                 // the model name sent to the router
  int64_t max_tokens_per_turn = 1024;  // the per-turn output cap ("model cap")
  bool has_temperature = false;
  double temperature = 0;
};

// The principal of a task's own command policy (ExecPermission::policy).
inline constexpr const char* kTaskPrincipal = "task";

struct ExecPermission {
  // The task's own command rules (`executables`), in the access policy's command-rule
  // form (docs/policy.md, grants[i].commands), compiled by the policy loader into a
  // policy in which kTaskPrincipal is granted exactly them (policy/command_policy.h):
  // executables[i] is rule grants[0].commands[i]. The harness decides with it, through
  // the sandbox's unwrapping and the policy's rule check, then the sandbox decides again
  // with the command grants of the principal the harness authenticated as
  // (docs/sandbox.md, "Service"). A manifest cannot name that principal: the key
  // `rule_set` is refused. Null (no executables) denies every command.
  std::vector<policy::CommandRule> rules;
  std::shared_ptr<const policy::Snapshot> policy;
};

struct Permissions {
  // Path globs relative to the workspace root (docs/sandbox.md glob syntax: `*`, `?`,
  // `[..]`, `**` as a whole component). Empty read = nothing readable.
  std::vector<std::string> fs_read;
  std::vector<std::string> fs_write;
  bool has_exec = false;
  ExecPermission exec;
  // Always "deny" (the sandbox has no network); kept so that a manifest says so.
  std::string network = "deny";
};

struct Budget {
  int64_t max_model_tokens = 0;   // completion tokens over all turns (docs/tasks.md)
  int64_t max_tool_calls = 0;     // proposed calls, counted before any runs
  int64_t max_turns = 0;          // model requests
  int64_t max_wall_seconds = 0;   // whole task
  int64_t max_consecutive_denials = 3;
  int64_t tool_wall_ms = 10000;   // one tool call's wall-clock limit in the sandbox
  int64_t max_children = 0;       // child tasks (delegate_task); 0 = no delegation
};

struct AcceptanceCheck {
  enum class Kind { kAnswerContains, kExactlyNBullets, kCitedFilesWereRead };
  Kind kind;
  std::string text;   // kAnswerContains
  int64_t n = 0;      // kExactlyNBullets
  std::string Name() const;  // "answer_contains", ...
};

struct TaskManifest {
  std::string source;          // file name used in messages
  std::string name;            // optional label
  std::string goal;
  std::string system_prompt;   // optional
  std::string workspace;       // as written
  std::string client_profile;  // optional label recorded with the task
  ModelSpec model;
  std::vector<std::string> tools;  // advertised, in manifest order
  Permissions permissions;
  Budget budget;
  std::vector<AcceptanceCheck> acceptance;
};

// Parses manifest text. `source` names it in errors. The workspace is kept as written
// (ResolveWorkspace resolves it against the manifest's directory).
// Errors: INVALID_ARGUMENT with reason "invalid_manifest" and a
// "source:line:column: path: what" message.
absl::StatusOr<TaskManifest> ParseManifest(absl::string_view text, const std::string& source);

// Reads and parses a file. Errors: as ParseManifest; NOT_FOUND when unreadable.
absl::StatusOr<TaskManifest> LoadManifestFile(const std::string& path);

// The absolute, symlink-free workspace directory: `workspace` resolved against
// `base_dir` when relative. Errors: NOT_FOUND / FAILED_PRECONDITION (not a directory).
absl::StatusOr<std::string> ResolveWorkspace(const std::string& workspace,
                                             const std::string& base_dir);

}  // namespace gantry::harness

#endif  // GANTRY_HARNESS_SVC_MANIFEST_H_
