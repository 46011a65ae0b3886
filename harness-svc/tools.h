// The harness's tools: their OpenAI function schemas (what the model is offered), the
// strict reading of a call's arguments into a gantry.v1.ToolCall, and authorization
// against the task's permissions (docs/tasks.md, "permissions").
//
// Authorization here is the harness's decision; the sandbox decides again with the
// grant the ToolCall carries (read/write globs, the exec rule set) and may only narrow
// it. A refusal is never an error of the task: it becomes an observation for the model.
//
// Thread-safety: pure functions.
#ifndef GANTRY_HARNESS_SVC_TOOLS_H_
#define GANTRY_HARNESS_SVC_TOOLS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/json.h"
#include "gantry/v1/tool.pb.h"
#include "harness-svc/manifest.h"

namespace gantry::harness {

// The OpenAI `tools` array entry ({"type": "function", "function": {...}}) of a built-in
// tool. Precondition: `name` is one of kBuiltinTools.
json::Value ToolSchema(const std::string& name);

// Glob match over "/"-separated relative paths, the sandbox's syntax: "*" and "?"
// within a component, "[...]" classes ("[!...]" negates), "**" as a whole component
// matches zero or more components ("dir/**" matches "dir" itself too).
bool PathGlobMatch(absl::string_view pattern, absl::string_view path);

// A tool path normalised lexically: relative to the workspace root ("" is the root),
// "." dropped, ".." popped, a leading "/" taken as the root (as the sandbox reads it).
// Errors: PERMISSION_DENIED when ".." leaves the workspace; INVALID_ARGUMENT for a NUL
// byte or more than 4096 bytes.
absl::StatusOr<std::string> NormalizeToolPath(absl::string_view path);

// The outcome of authorizing one proposed call.
struct Authorization {
  bool allowed = false;
  // With a refusal: a stable-prefixed reason for the model and the ledger:
  //   "invalid_arguments: ...", "permission:fs.read: ...", "permission:exec: rule:<id>: ..."
  std::string reason;
  // With allowed: the call for the sandbox (call_id, task_id, workspace, grant, limits,
  // arguments_json and the tool's arguments filled in).
  v1::ToolCall call;
  // The normalised path a file tool touches ("" for exec), for the evidence.
  std::string path;
};

// Reads `arguments_json` of tool `name` strictly (unknown members, wrong types and
// missing required members are refused) and decides it against `manifest`.
// `workspace` is the resolved host path of the workspace.
Authorization AuthorizeToolCall(const TaskManifest& manifest, const std::string& workspace,
                                const std::string& task_id, const std::string& call_id,
                                const std::string& name, const std::string& arguments_json);

// The manifest of a child task started by a `delegate_task` call of `parent`: a
// narrower goal, tools (a subset, never delegate_task), read globs (each equal to or
// under one of the parent's), no write globs, and a budget within what the parent has
// left (its tokens and tool calls are then charged to the parent). No acceptance
// checks: the parent judges the child's report.
// Errors: PERMISSION_DENIED with a reason "invalid_arguments: ...",
// "delegation:tools: ...", "delegation:fs.read: ..." or "delegation:budget: ...".
absl::StatusOr<TaskManifest> NarrowForChild(const TaskManifest& parent, const std::string& arguments_json,
                                            int64_t tokens_left, int64_t calls_left, int64_t wall_left_s);

}  // namespace gantry::harness

#endif  // GANTRY_HARNESS_SVC_TOOLS_H_
