#include "harness-svc/tools.h"

#include <fnmatch.h>

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "sandbox-svc/command_rules.h"
#include "sandbox-svc/policy_command_rules.h"
#include "sandbox-svc/executable_resolver.h"

namespace gantry::harness {
namespace {

constexpr char kSchemaReadFile[] = R"js({"type": "object", "properties": {
  "path": {"type": "string", "description": "File path relative to the workspace root"},
  "first_line": {"type": "integer", "minimum": 1, "description": "First line to read (1-based, inclusive)"},
  "last_line": {"type": "integer", "minimum": 1, "description": "Last line to read (inclusive)"}},
  "required": ["path"], "additionalProperties": false})js";
constexpr char kSchemaListDir[] = R"js({"type": "object", "properties": {
  "path": {"type": "string", "description": "Directory relative to the workspace root; an empty path is the root"}},
  "required": ["path"], "additionalProperties": false})js";
constexpr char kSchemaGlob[] = R"js({"type": "object", "properties": {
  "pattern": {"type": "string", "minLength": 1, "description": "Glob over relative paths: *, ?, [..], ** for any depth"},
  "base": {"type": "string", "description": "Directory to search from, relative to the workspace root"}},
  "required": ["pattern"], "additionalProperties": false})js";
constexpr char kSchemaGrep[] = R"js({"type": "object", "properties": {
  "pattern": {"type": "string", "minLength": 1, "description": "Extended regular expression"},
  "path": {"type": "string", "description": "File or directory relative to the workspace root"},
  "ignore_case": {"type": "boolean"},
  "max_matches": {"type": "integer", "minimum": 1, "maximum": 1000}},
  "required": ["pattern"], "additionalProperties": false})js";
constexpr char kSchemaExec[] = R"js({"type": "object", "properties": {
  "argv": {"type": "array", "items": {"type": "string"}, "minItems": 1, "description": "Program and arguments; no shell"},
  "cwd": {"type": "string", "description": "Working directory relative to the workspace root"}},
  "required": ["argv"], "additionalProperties": false})js";

constexpr char kSchemaDelegate[] = R"js({"type": "object", "properties": {
  "goal": {"type": "string", "minLength": 1, "description": "The child task's goal"},
  "tools": {"type": "array", "items": {"enum": ["read_file", "list_dir", "glob", "grep", "exec"]}, "description": "A subset of this task's tools"},
  "fs_read": {"type": "array", "items": {"type": "string"}, "description": "Readable path globs, within this task's"},
  "max_model_tokens": {"type": "integer", "minimum": 1},
  "max_tool_calls": {"type": "integer", "minimum": 0},
  "max_turns": {"type": "integer", "minimum": 1}},
  "required": ["goal", "tools", "max_model_tokens", "max_tool_calls", "max_turns"], "additionalProperties": false})js";

struct ToolInfo {
  const char* name;
  const char* description;
  const char* schema;
};

constexpr ToolInfo kTools[] = {
    {"read_file", "Read a text file of the workspace, whole or a line range.", kSchemaReadFile},
    {"list_dir", "List a directory of the workspace; directories end with '/'.", kSchemaListDir},
    {"glob", "Find workspace files whose relative path matches a glob.", kSchemaGlob},
    {"grep", "Search workspace files for an extended regular expression; prints path:line:text.",
     kSchemaGrep},
    {"exec", "Run one permitted program (argument vector, no shell) in the workspace.", kSchemaExec},
    {"delegate_task", "Start a child task with a narrower goal, tools, paths and budget; returns its report.",
     kSchemaDelegate},
};

Authorization Refuse(std::string reason) {
  Authorization a;
  a.reason = std::move(reason);
  return a;
}

// A denial by the task's own command policy names its rule as the manifest does:
// grants[0].commands[i] is executables[i].
std::string TaskRuleReason(const std::string& reason) {
  constexpr absl::string_view kCompiled = "rule:grants[0].commands[";
  if (!absl::StartsWith(reason, kCompiled)) return reason;
  return absl::StrCat("rule:executables[", absl::string_view(reason).substr(kCompiled.size()));
}

// Strict argument reading.
class Args {
 public:
  Args(const json::Value& obj, std::vector<std::string> allowed) : obj_(obj) {
    for (const auto& [k, v] : obj.members()) {
      bool ok = false;
      for (const auto& a : allowed) ok = ok || a == k;
      if (!ok && error_.empty()) error_ = absl::StrCat("unknown argument '", k.substr(0, 64), "'");
    }
  }
  const std::string& error() const { return error_; }
  std::string String(const char* key, bool required) {
    const json::Value* v = obj_.Find(key);
    if (v == nullptr) {
      if (required) Set(absl::StrCat("'", key, "' is required"));
      return "";
    }
    if (!v->is_string()) {
      Set(absl::StrCat("'", key, "' must be a string"));
      return "";
    }
    return v->as_string();
  }
  int64_t Int(const char* key, int64_t min, int64_t max) {
    const json::Value* v = obj_.Find(key);
    if (v == nullptr) return 0;
    auto i = v->is_integer() ? v->as_int64() : absl::nullopt;
    if (!i || *i < min || *i > max) {
      Set(absl::StrCat("'", key, "' must be an integer in [", min, ", ", max, "]"));
      return 0;
    }
    return *i;
  }
  bool Bool(const char* key) {
    const json::Value* v = obj_.Find(key);
    if (v == nullptr) return false;
    if (!v->is_bool()) {
      Set(absl::StrCat("'", key, "' must be true or false"));
      return false;
    }
    return v->as_bool();
  }
  const json::Value* Raw(const char* key) const { return obj_.Find(key); }
  void Set(std::string e) {
    if (error_.empty()) error_ = std::move(e);
  }

 private:
  const json::Value& obj_;
  std::string error_;
};

bool MatchesAny(const std::vector<std::string>& globs, const std::string& rel) {
  for (const auto& g : globs) {
    if (PathGlobMatch(g, rel)) return true;
  }
  return false;
}

bool MatchParts(const std::vector<std::string>& pat, size_t pi, const std::vector<std::string>& path,
                size_t si) {
  if (pi == pat.size()) return si == path.size();
  if (pat[pi] == "**") {
    for (size_t k = si; k <= path.size(); ++k) {
      if (MatchParts(pat, pi + 1, path, k)) return true;
    }
    return false;
  }
  if (si == path.size()) return false;
  if (::fnmatch(pat[pi].c_str(), path[si].c_str(), 0) != 0) return false;
  return MatchParts(pat, pi + 1, path, si + 1);
}

}  // namespace

json::Value ToolSchema(const std::string& name) {
  for (const ToolInfo& t : kTools) {
    if (name != t.name) continue;
    json::Value fn = json::Value::EmptyObject();
    fn.Set("name", json::Value::String(t.name));
    fn.Set("description", json::Value::String(t.description));
    fn.Set("parameters", *json::Parse(t.schema));
    json::Value out = json::Value::EmptyObject();
    out.Set("type", json::Value::String("function"));
    out.Set("function", std::move(fn));
    return out;
  }
  return json::Value();
}

bool PathGlobMatch(absl::string_view pattern, absl::string_view path) {
  if (pattern.size() > 4096 || path.size() > 4096) return false;
  std::vector<std::string> pat = absl::StrSplit(pattern, '/', absl::SkipEmpty());
  std::vector<std::string> parts = absl::StrSplit(path, '/', absl::SkipEmpty());
  // Bound the backtracking of many "**": at most 8 of them.
  int stars = 0;
  for (const auto& p : pat) stars += p == "**";
  if (stars > 8) return false;
  return MatchParts(pat, 0, parts, 0);
}

absl::StatusOr<std::string> NormalizeToolPath(absl::string_view path) {
  if (path.size() > 4096) {
    return Error(absl::StatusCode::kInvalidArgument, "invalid_tool_call", "path longer than 4096 bytes");
  }
  if (path.find('\0') != absl::string_view::npos) {
    return Error(absl::StatusCode::kInvalidArgument, "invalid_tool_call", "path contains a NUL byte");
  }
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    if (part == ".") continue;
    if (part == "..") {
      if (out.empty()) {
        return Error(absl::StatusCode::kPermissionDenied, "permission_denied", "path escapes the workspace");
      }
      out.pop_back();
      continue;
    }
    out.emplace_back(part);
  }
  return absl::StrJoin(out, "/");
}

Authorization AuthorizeToolCall(const TaskManifest& manifest, const std::string& workspace,
                                const std::string& task_id, const std::string& call_id,
                                const std::string& name, const std::string& arguments_json) {
  bool advertised = false;
  for (const auto& t : manifest.tools) advertised = advertised || t == name;
  if (!advertised) return Refuse(absl::StrCat("invalid_arguments: '", name.substr(0, 64), "' is not an advertised tool"));
  auto parsed = json::Parse(arguments_json.empty() ? "{}" : arguments_json);
  if (!parsed.ok() || !parsed->is_object()) {
    return Refuse("invalid_arguments: the arguments are not a JSON object");
  }
  Authorization a;
  v1::ToolCall& call = a.call;
  call.set_call_id(call_id);
  call.set_task_id(task_id);
  call.set_workspace(workspace);
  call.set_arguments_json(arguments_json);
  call.mutable_limits()->set_wall_ms(static_cast<uint32_t>(manifest.budget.tool_wall_ms));
  const Permissions& perm = manifest.permissions;
  for (const auto& g : perm.fs_read) call.mutable_grant()->add_read_paths(g);
  for (const auto& g : perm.fs_write) call.mutable_grant()->add_write_paths(g);

  std::string raw_path;
  if (name == "read_file") {
    Args args(*parsed, {"path", "first_line", "last_line"});
    auto* t = call.mutable_read_file();
    raw_path = args.String("path", true);
    t->set_path(raw_path);
    t->set_first_line(static_cast<uint32_t>(args.Int("first_line", 1, 1 << 30)));
    t->set_last_line(static_cast<uint32_t>(args.Int("last_line", 1, 1 << 30)));
    if (!args.error().empty()) return Refuse(absl::StrCat("invalid_arguments: ", args.error()));
    if (t->last_line() != 0 && t->last_line() < t->first_line()) {
      return Refuse("invalid_arguments: last_line is before first_line");
    }
  } else if (name == "list_dir") {
    Args args(*parsed, {"path"});
    raw_path = args.String("path", true);
    call.mutable_list_dir()->set_path(raw_path);
    if (!args.error().empty()) return Refuse(absl::StrCat("invalid_arguments: ", args.error()));
  } else if (name == "glob") {
    Args args(*parsed, {"pattern", "base"});
    auto* t = call.mutable_glob();
    t->set_pattern(args.String("pattern", true));
    raw_path = args.String("base", false);
    t->set_base(raw_path);
    if (args.error().empty() && t->pattern().empty()) args.Set("'pattern' must not be empty");
    if (!args.error().empty()) return Refuse(absl::StrCat("invalid_arguments: ", args.error()));
  } else if (name == "grep") {
    Args args(*parsed, {"pattern", "path", "ignore_case", "max_matches"});
    auto* t = call.mutable_grep();
    t->set_pattern(args.String("pattern", true));
    raw_path = args.String("path", false);
    t->set_path(raw_path);
    t->set_ignore_case(args.Bool("ignore_case"));
    t->set_max_matches(static_cast<uint32_t>(args.Int("max_matches", 1, 1000)));
    if (args.error().empty() && t->pattern().empty()) args.Set("'pattern' must not be empty");
    if (!args.error().empty()) return Refuse(absl::StrCat("invalid_arguments: ", args.error()));
  } else if (name == "exec") {
    Args args(*parsed, {"argv", "cwd"});
    auto* t = call.mutable_exec();
    const json::Value* argv = args.Raw("argv");
    if (argv == nullptr || !argv->is_array() || argv->items().empty() || argv->items().size() > 4096) {
      args.Set("'argv' must be an array of 1 to 4096 strings");
    } else {
      for (const auto& item : argv->items()) {
        if (!item.is_string()) {
          args.Set("'argv' must be an array of strings");
          break;
        }
        t->add_argv(item.as_string());
      }
    }
    std::string cwd = args.String("cwd", false);
    if (!args.error().empty()) return Refuse(absl::StrCat("invalid_arguments: ", args.error()));
    auto rel = NormalizeToolPath(cwd);
    if (!rel.ok()) return Refuse(absl::StrCat("permission:fs: cwd: ", rel.status().message()));
    t->set_cwd(*rel);
    if (!perm.has_exec) return Refuse("permission:exec: the task grants no commands");
    std::vector<std::string> words(t->argv().begin(), t->argv().end());
    sandbox::SandboxViewResolver resolver(workspace);
    const std::string sandbox_cwd = rel->empty() ? "/workspace" : absl::StrCat("/workspace/", *rel);
    if (perm.exec.policy == nullptr) {
      return Refuse("permission:exec: rule:default-deny: the task grants no executables");
    }
    // The sandbox's unwrapping, the policy's rule check: the task's executables are a
    // policy of their own (manifest.h, ExecPermission).
    sandbox::CommandDecision d = sandbox::DecideCommand(
        sandbox::PolicyCommandRules(perm.exec.policy, kTaskPrincipal, resolver), words,
        sandbox_cwd, resolver);
    if (!d.allowed) return Refuse(absl::StrCat("permission:exec: ", TaskRuleReason(d.reason)));
    // grant.exec_rules stays empty: the sandbox takes the principal from this process's
    // authenticated connection.
    a.allowed = true;
    return a;
  } else {
    return Refuse(absl::StrCat("invalid_arguments: unknown tool '", name.substr(0, 64), "'"));
  }

  // File tools: the normalised path must match a read (or write) glob of the task.
  auto rel = NormalizeToolPath(raw_path);
  if (!rel.ok()) return Refuse(absl::StrCat("permission:fs.read: ", rel.status().message()));
  a.path = *rel;
  if (!MatchesAny(perm.fs_read, *rel) && !MatchesAny(perm.fs_write, *rel)) {
    return Refuse(absl::StrCat("permission:fs.read: '", rel->empty() ? "." : rel->substr(0, 200),
                               "' is not readable in this task (fs.read: ",
                               perm.fs_read.empty() ? "none" : absl::StrJoin(perm.fs_read, ", "), ")"));
  }
  a.allowed = true;
  return a;
}

namespace {

// Whether child glob `g` can only match paths that parent glob `p` matches: equal, or
// `p` is "D/**" (or "**") and `g` lies under D.
bool GlobWithin(const std::string& g, const std::string& p) {
  if (g == p || p == "**") return true;
  if (p.size() > 3 && p.compare(p.size() - 3, 3, "/**") == 0) {
    std::string dir = p.substr(0, p.size() - 2);  // "D/"
    bool literal_dir = dir.find_first_of("*?[") == std::string::npos;
    return literal_dir && (g.compare(0, dir.size(), dir) == 0 || g + "/" == dir);
  }
  return false;
}

}  // namespace

absl::StatusOr<TaskManifest> NarrowForChild(const TaskManifest& parent, const std::string& arguments_json,
                                            int64_t tokens_left, int64_t calls_left, int64_t wall_left_s) {
  auto fail = [](const std::string& what) {
    return Error(absl::StatusCode::kPermissionDenied, "permission_denied", what);
  };
  auto parsed = json::Parse(arguments_json.empty() ? "{}" : arguments_json);
  if (!parsed.ok() || !parsed->is_object()) return fail("invalid_arguments: the arguments are not a JSON object");
  Args args(*parsed, {"goal", "tools", "fs_read", "max_model_tokens", "max_tool_calls", "max_turns"});
  TaskManifest child = parent;
  child.name = parent.name.empty() ? "child" : parent.name + "/child";
  child.goal = args.String("goal", true);
  child.budget.max_model_tokens = args.Int("max_model_tokens", 1, 100000000);
  child.budget.max_tool_calls = args.Int("max_tool_calls", 0, 100000);
  child.budget.max_turns = args.Int("max_turns", 1, 10000);
  if (!args.error().empty()) return fail(absl::StrCat("invalid_arguments: ", args.error()));
  if (child.goal.empty()) return fail("invalid_arguments: 'goal' must not be empty");
  child.tools.clear();
  const json::Value* tools = args.Raw("tools");
  if (tools == nullptr || !tools->is_array()) return fail("invalid_arguments: 'tools' must be an array");
  for (const auto& t : tools->items()) {
    if (!t.is_string()) return fail("invalid_arguments: 'tools' must be an array of names");
    const std::string& name = t.as_string();
    bool parent_has = false;
    for (const auto& p : parent.tools) parent_has = parent_has || p == name;
    if (name == "delegate_task") return fail("delegation:tools: a child task cannot delegate further");
    if (!parent_has) return fail(absl::StrCat("delegation:tools: '", name.substr(0, 64), "' is not a tool of the parent"));
    if (std::find(child.tools.begin(), child.tools.end(), name) == child.tools.end()) child.tools.push_back(name);
  }
  if (const json::Value* reads = args.Raw("fs_read")) {
    if (!reads->is_array()) return fail("invalid_arguments: 'fs_read' must be an array");
    child.permissions.fs_read.clear();
    for (const auto& r : reads->items()) {
      if (!r.is_string() || r.as_string().empty()) return fail("invalid_arguments: 'fs_read' must hold globs");
      const std::string& g = r.as_string();
      auto norm = NormalizeToolPath(g);
      if (!norm.ok() || *norm != g) return fail(absl::StrCat("delegation:fs.read: '", g.substr(0, 100), "' is not a normalised relative glob"));
      bool within = false;
      for (const auto& p : parent.permissions.fs_read) within = within || GlobWithin(g, p);
      if (!within) return fail(absl::StrCat("delegation:fs.read: '", g.substr(0, 100), "' is wider than the parent's read globs"));
      child.permissions.fs_read.push_back(g);
    }
  }
  child.permissions.fs_write.clear();
  if (std::find(child.tools.begin(), child.tools.end(), "exec") == child.tools.end()) {
    child.permissions.has_exec = false;
  }
  if (child.budget.max_model_tokens > tokens_left) {
    return fail(absl::StrCat("delegation:budget: max_model_tokens ", child.budget.max_model_tokens,
                             " is more than the parent has left (", tokens_left, ")"));
  }
  if (child.budget.max_tool_calls > calls_left) {
    return fail(absl::StrCat("delegation:budget: max_tool_calls ", child.budget.max_tool_calls,
                             " is more than the parent has left (", calls_left, ")"));
  }
  if (child.budget.max_turns > parent.budget.max_turns) {
    return fail(absl::StrCat("delegation:budget: max_turns ", child.budget.max_turns, " is more than the parent's"));
  }
  child.budget.max_wall_seconds = std::max<int64_t>(1, std::min(parent.budget.max_wall_seconds, wall_left_s));
  child.budget.max_children = 0;
  child.model.max_tokens_per_turn = std::min(parent.model.max_tokens_per_turn, child.budget.max_model_tokens);
  child.acceptance.clear();
  return child;
}

}  // namespace gantry::harness
