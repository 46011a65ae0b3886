#include "sandbox-svc/sandbox.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <functional>
#include <mutex>
#include <shared_mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/error_codes.h"
#include "common/status.h"
#include "sandbox-svc/executable_resolver.h"
#include "sandbox-svc/path_guard.h"
#include "sandbox-svc/policy_command_rules.h"
#include "sandbox-svc/workspace_roots.h"

namespace gantry::sandbox {
namespace {

constexpr size_t kMaxArgs = 4096;
constexpr size_t kMaxArgBytes = 1u << 20;
constexpr uint32_t kDefaultGrepMatches = 1000;

std::string InSandbox(const std::string& rel) {
  return rel.empty() ? kSandboxWorkspace : absl::StrCat(kSandboxWorkspace, "/", rel);
}

bool HasGlobMeta(absl::string_view s) { return s.find_first_of("*?[") != absl::string_view::npos; }

template <typename T>
T Pick(T requested, T fallback, T ceiling) {
  T v = requested != 0 ? requested : fallback;
  return std::min(v, ceiling);
}

// Per-call context.
struct Call {
  const v1::ToolCall& call;
  const SandboxOptions& options;
  std::string workspace;  // resolved host path
  IsolationLimits limits;
  v1::ToolResult* result;
};

void Deny(v1::ToolResult* r, const std::string& reason) {
  r->set_outcome(v1::TOOL_DENIED);
  r->set_denial_reason(reason);
}

void Fail(v1::ToolResult* r, const absl::Status& status) {
  r->set_outcome(v1::TOOL_ERROR);
  ToProto(status, r->mutable_error());
}

bool Exists(const std::string& host) {
  struct stat st;
  return lstat(host.c_str(), &st) == 0;
}

bool IsDir(const std::string& host) {
  struct stat st;
  return stat(host.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Fills `r` from an isolated run of `spec`; returns the outcome for post-processing.
absl::StatusOr<RunOutcome> RunInto(Call& c, IsolationSpec spec) {
  spec.workspace = c.workspace;
  spec.limits = c.limits;
  spec.supervise_exec = c.options.supervise_exec;
  PrivilegeDrop drop =
      ChoosePrivilegeDrop(c.workspace, c.options.fallback_uid, c.options.fallback_gid);
  auto out = RunIsolated(spec, drop);
  if (!out.ok()) {
    Fail(c.result, out.status());
    return out.status();
  }
  v1::ToolResult* r = c.result;
  r->set_outcome(out->timed_out ? v1::TOOL_TIMED_OUT : v1::TOOL_RAN);
  r->set_exit_code(out->exit_code);
  r->set_term_signal(out->term_signal);
  r->set_stdout(out->stdout_data);
  r->set_stderr(out->stderr_data);
  r->set_stdout_truncated(out->stdout_truncated);
  r->set_stderr_truncated(out->stderr_truncated);
  auto* u = r->mutable_usage();
  u->set_wall_us(out->wall_us);
  u->set_user_cpu_us(out->user_cpu_us);
  u->set_system_cpu_us(out->system_cpu_us);
  u->set_max_rss_bytes(out->max_rss_bytes);
  for (const ExecRecord& e : out->execs) {
    v1::ExecDecision* d = r->add_execs();
    d->set_executable(e.executable);
    for (const auto& a : e.argv) d->add_argv(a);
    d->set_allowed(e.allowed);
    d->set_rule_id(e.rule_id);
    d->set_reason(e.reason);
    d->set_decide_us(e.decide_us);
  }
  r->set_execs_decided(out->execs_decided);
  r->set_execs_denied(out->execs_denied);
  // The command itself refused by the supervisor: nothing of it ran.
  if (!out->execs.empty() && !out->execs[0].allowed && !out->timed_out) {
    Deny(r, out->execs[0].reason);
  }
  return out;
}

// The exec supervisor's decision under command rules: the rules decide the argv the
// process passed, and the program its argv[0] names must be the file the kernel runs.
ExecVerdict ExecVerdictOf(const CommandDecision& d, const ExecRequest& x) {
  if (!d.allowed) return {false, d.rule_id, d.reason};
  if (d.chain.empty() || d.chain[0] != x.executable) {
    return {false, "exec_mismatch",
            absl::StrCat("rule:exec_mismatch: argv[0] '", x.argv[0].substr(0, 200), "' names '",
                         d.chain.empty() ? "" : d.chain[0], "' but the process executes '",
                         x.executable, "'")};
  }
  return {true, d.rule_id, ""};
}

// What bounds the workspace reads of the programs of a decided chain (read_scope.h).
ReadScope ReadScopeOf(const CommandRuleSet& rules, const std::vector<std::string>& chain) {
  ReadScope scope;
  for (const std::string& program : chain) rules.AppendReadScope(program, &scope);
  return scope;
}

// The executables `principal`'s command grants name and no deny removes.
std::vector<std::string> GrantedPrograms(const policy::Snapshot& snapshot,
                                         const std::string& principal) {
  std::vector<std::string> out;
  auto it = snapshot.by_name.find(principal);
  if (it == snapshot.by_name.end()) return out;
  for (const auto& [path, access] : snapshot.principals[it->second].commands) {
    if (access.deny_rule.empty() && !access.grants.empty()) out.push_back(path);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Gantry's own fixed commands: exactly these execs (executable, argv), nothing else.
struct ExpectedExec {
  std::string executable;
  std::vector<std::string> argv;
};
ExecDecider AllowExactly(std::vector<ExpectedExec> expected) {
  return [expected = std::move(expected)](const ExecRequest& x) {
    for (const auto& e : expected) {
      if (e.executable == x.executable && e.argv == x.argv) return ExecVerdict{true, "tool", ""};
    }
    return ExecVerdict{false, "tool",
                       absl::StrCat("rule:tool: '", x.executable,
                                    "' is not one of the tool's own commands")};
  };
}

// Resolves a tool path; on failure fills `r` (denied or error) and returns nullopt.
absl::optional<std::string> ToolPath(Call& c, const std::string& path) {
  auto rel = ResolveInWorkspace(c.workspace, path);
  if (!rel.ok()) {
    if (rel.status().code() == absl::StatusCode::kPermissionDenied) {
      Deny(c.result, absl::StrCat("rule:grant: ", rel.status().message()));
    } else {
      Fail(c.result, ReasonError("invalid_tool_call", rel.status().message()));
    }
    return absl::nullopt;
  }
  return *rel;
}

bool ReadGranted(const Call& c, const std::string& rel) {
  const auto& g = c.call.grant();
  if (g.read_paths().empty()) return true;  // whole workspace (docs/sandbox.md)
  std::vector<std::string> globs(g.read_paths().begin(), g.read_paths().end());
  globs.insert(globs.end(), g.write_paths().begin(), g.write_paths().end());
  return MatchesAny(globs, rel);
}

bool WriteGranted(const Call& c, const std::string& rel) {
  const auto& g = c.call.grant();
  std::vector<std::string> globs(g.write_paths().begin(), g.write_paths().end());
  return !rel.empty() && MatchesAny(globs, rel);
}

// The host-side paths bound read-write for an exec call: each write glob that is a
// literal path or "<literal>/**", when it exists inside the workspace and is reached
// without a symbolic link. Other patterns, a file with hard links, and a grant whose
// path goes through a link (whoever writes the workspace chooses the link: `build -> .`
// would turn `build/**` into the whole workspace; found by a red team) are not mounted
// writable for exec (narrowing, as the contract allows).
std::vector<std::string> WritableMounts(const Call& c) {
  std::vector<std::string> out;
  for (const auto& glob : c.call.grant().write_paths()) {
    std::string literal = glob;
    if (absl::EndsWith(literal, "/**")) literal.resize(literal.size() - 3);
    if (literal == "**") literal = "";
    if (HasGlobMeta(literal)) continue;
    auto rel = ResolveInWorkspace(c.workspace, literal);
    auto lexical = SplitToolPath(literal);
    if (!rel.ok() || !lexical.ok() || *rel != absl::StrJoin(*lexical, "/") ||
        !Exists(absl::StrCat(c.workspace, "/", *rel))) {
      continue;
    }
    // A file with other names (hard links) would be written under those too, perhaps
    // in another workspace: not mounted.
    struct stat st;
    if (lstat(absl::StrCat(c.workspace, "/", *rel).c_str(), &st) != 0 ||
        (S_ISREG(st.st_mode) && st.st_nlink > 1)) {
      continue;
    }
    if (std::find(out.begin(), out.end(), *rel) == out.end()) out.push_back(*rel);
  }
  // The workspace root itself ("" ) is bound after the read-only view; keep it first.
  std::sort(out.begin(), out.end());
  return out;
}

void RunExec(Call& c) {
  const v1::ExecArgs& e = c.call.exec();
  v1::ToolResult* r = c.result;
  if (e.argv().empty() || static_cast<size_t>(e.argv_size()) > kMaxArgs) {
    Fail(r, ReasonError("invalid_tool_call", "exec needs 1 to 4096 arguments"));
    return;
  }
  size_t bytes = 0;
  for (const auto& a : e.argv()) {
    bytes += a.size();
    if (a.find('\0') != std::string::npos) {
      Fail(r, ReasonError("invalid_tool_call", "an argument contains a NUL byte"));
      return;
    }
  }
  if (bytes > kMaxArgBytes) {
    Fail(r, ReasonError("invalid_tool_call", "arguments exceed 1 MiB"));
    return;
  }
  IsolationSpec spec;
  for (const auto& [k, v] : e.env()) {
    bool valid = !k.empty() && k.find_first_of("=\0", 0, 2) == std::string::npos &&
                 v.find('\0') == std::string::npos;
    if (!valid) {
      Fail(r, ReasonError("invalid_tool_call", "invalid environment variable"));
      return;
    }
    if (IsDeniedEnvName(k) || k == "HOME" || k == "LANG") {
      Deny(r, absl::StrCat("rule:env: setting ", k.substr(0, 100), " is denied"));
      return;
    }
    spec.env.emplace_back(k, v);
  }
  std::sort(spec.env.begin(), spec.env.end());
  auto cwd = ToolPath(c, e.cwd());
  if (!cwd) return;
  if (!IsDir(absl::StrCat(c.workspace, "/", *cwd))) {
    Fail(r, ReasonError("invalid_tool_call", "cwd is not a directory in the workspace"));
    return;
  }
  std::vector<std::string> argv(e.argv().begin(), e.argv().end());
  SandboxViewResolver resolver(c.workspace);
  const std::string sandbox_cwd = InSandbox(*cwd);
  if (c.options.isolation_only) {
    auto resolved = resolver.Resolve(argv[0], sandbox_cwd);
    if (!resolved.ok()) {
      Deny(r, absl::StrCat("rule:default-deny: ", resolved.status().message()));
      return;
    }
    argv[0] = *resolved;
    r->set_resolved_executable(*resolved);
  } else {
    std::shared_ptr<const policy::Snapshot> snapshot;
    if (c.options.policy) snapshot = c.options.policy();
    if (snapshot == nullptr) {
      Deny(r, absl::StrCat("rule:default-deny: no access policy is in force (principal '",
                           c.call.grant().exec_rules().substr(0, 100), "')"));
      return;
    }
    // Only the programs the rules name exist in the sandbox's program directories.
    spec.only_programs = true;
    spec.programs = GrantedPrograms(*snapshot, c.call.grant().exec_rules());
    auto rules = std::make_shared<const PolicyCommandRules>(std::move(snapshot),
                                                            c.call.grant().exec_rules(), resolver);
    CommandDecision d = DecideCommand(*rules, argv, sandbox_cwd, resolver);
    r->set_resolved_executable(d.resolved_executable);
    if (!d.allowed) {
      Deny(r, d.reason);
      return;
    }
    argv = d.argv;
    // What the operand globs allow of the workspace is also what the kernel lets every
    // program of the call read (Landlock: read_scope.h): sed '1r FILE', awk's getline,
    // python3 -c open(...) cannot reach past them.
    spec.read_scope = ReadScopeOf(*rules, d.chain);
    // The same rules decide every exec inside, with the argv each process really passes.
    // A program started inside runs in the call's Landlock domain, which can only be
    // narrowed by itself, never by the service: one whose own operand globs allow less
    // than that domain is refused rather than run with more than its rule allows
    // (found by a red team: `git status`, granted without globs, ran a core.fsmonitor
    // python3 granted only /workspace/src/**, which then read the whole workspace).
    // What the writable grants hold is readable to every program of the call anyway,
    // so it counts as within any program's globs.
    std::vector<std::string> granted;
    for (const std::string& rel : WritableMounts(c)) {
      granted.push_back(rel.empty() ? "/workspace/**" : InSandbox(rel));
      if (!rel.empty()) granted.push_back(InSandbox(rel) + "/**");
    }
    // An unconstrained domain is the whole workspace (what a program inherits).
    ReadScope domain = spec.read_scope;
    if (domain.unconstrained()) domain.all_of = {{"/workspace/**"}};
    spec.decide_exec = [rules, resolver, domain, granted](const ExecRequest& x) {
      CommandDecision d = DecideCommand(*rules, x.argv, x.cwd, resolver);
      ExecVerdict verdict = ExecVerdictOf(d, x);
      if (!verdict.allowed) return verdict;
      ReadScope own = ReadScopeOf(*rules, d.chain);
      for (auto& any_of : own.all_of) any_of.insert(any_of.end(), granted.begin(), granted.end());
      if (!ScopeWithin(domain, own)) {
        return ExecVerdict{false, "exec_scope",
                           absl::StrCat("rule:exec_scope: '", d.resolved_executable.substr(0, 200),
                                        "' may read less of the workspace than the call's "
                                        "command, whose read scope it would inherit")};
      }
      return verdict;
    };
  }
  spec.argv = std::move(argv);
  spec.cwd = *cwd;
  spec.stdin_data = e.stdin();
  spec.writable = WritableMounts(c);
  (void)RunInto(c, std::move(spec));
}

// Runs one of our fixed commands (coreutils) inside the sandbox.
absl::StatusOr<RunOutcome> RunFixed(Call& c, std::vector<std::string> argv,
                                    std::vector<std::string> writable = {},
                                    std::string stdin_data = "",
                                    std::vector<ExpectedExec> also = {}) {
  SandboxViewResolver resolver(c.workspace);
  auto exe = resolver.Resolve(argv[0], kSandboxWorkspace);
  if (!exe.ok()) {
    Fail(c.result, ReasonError("internal", exe.status().message()));
    return exe.status();
  }
  argv[0] = *exe;
  c.result->set_resolved_executable(*exe);
  IsolationSpec spec;
  also.push_back({*exe, argv});
  spec.only_programs = true;
  for (const auto& e : also) spec.programs.push_back(e.executable);
  spec.decide_exec = AllowExactly(std::move(also));
  spec.argv = std::move(argv);
  spec.writable = std::move(writable);
  spec.stdin_data = std::move(stdin_data);
  return RunInto(c, std::move(spec));
}

absl::optional<std::string> ReadablePath(Call& c, const std::string& path) {
  auto rel = ToolPath(c, path);
  if (!rel) return absl::nullopt;
  if (!ReadGranted(c, *rel)) {
    Deny(c.result, absl::StrCat("rule:grant: ", rel->substr(0, 200), " is not granted for reading"));
    return absl::nullopt;
  }
  return rel;
}

void RunReadFile(Call& c) {
  const auto& a = c.call.read_file();
  auto rel = ReadablePath(c, a.path());
  if (!rel) return;
  if (a.first_line() == 0 && a.last_line() == 0) {
    (void)RunFixed(c, {"cat", "--", InSandbox(*rel)});
    return;
  }
  if (a.last_line() != 0 && a.last_line() < a.first_line()) {
    Fail(c.result, ReasonError("invalid_tool_call", "last_line is before first_line"));
    return;
  }
  std::string range = absl::StrCat(std::max<uint32_t>(a.first_line(), 1), ",",
                                   a.last_line() == 0 ? "$" : std::to_string(a.last_line()), "p");
  (void)RunFixed(c, {"sed", "-n", "--", range, InSandbox(*rel)});
}

void RunListDir(Call& c) {
  auto rel = ReadablePath(c, c.call.list_dir().path());
  if (!rel) return;
  (void)RunFixed(c, {"ls", "-1Ap", "--", InSandbox(*rel)});
}

void RunGlob(Call& c) {
  const auto& a = c.call.glob();
  if (a.pattern().empty() || a.pattern().size() > 4096) {
    Fail(c.result, ReasonError("invalid_tool_call", "glob needs a pattern"));
    return;
  }
  auto base = ReadablePath(c, a.base());
  if (!base) return;
  auto out = RunFixed(c, {"find", InSandbox(*base), "-mindepth", "1", "-printf", "%P\\n"});
  if (!out.ok() || c.result->outcome() != v1::TOOL_RAN) return;
  std::vector<std::string> matches;
  for (absl::string_view line : absl::StrSplit(out->stdout_data, '\n', absl::SkipEmpty())) {
    std::string rel = base->empty() ? std::string(line) : absl::StrCat(*base, "/", line);
    if (GlobMatch(a.pattern(), line) && ReadGranted(c, rel)) matches.push_back(rel);
  }
  std::sort(matches.begin(), matches.end());
  std::string text;
  for (const auto& m : matches) absl::StrAppend(&text, m, "\n");
  c.result->set_stdout(text);
}

void RunGrep(Call& c) {
  const auto& a = c.call.grep();
  if (a.pattern().empty() || a.pattern().size() > 4096 ||
      a.pattern().find('\0') != std::string::npos) {
    Fail(c.result, ReasonError("invalid_tool_call", "grep needs a pattern"));
    return;
  }
  auto rel = ReadablePath(c, a.path());
  if (!rel) return;
  uint32_t max = a.max_matches() ? a.max_matches() : kDefaultGrepMatches;
  std::vector<std::string> argv = {"grep", "-rnIE", "--color=never",
                                   absl::StrCat("--max-count=", max)};
  if (a.ignore_case()) argv.push_back("-i");
  argv.insert(argv.end(), {"-e", a.pattern(), "--", InSandbox(*rel)});
  auto out = RunFixed(c, argv);
  if (!out.ok() || c.result->outcome() != v1::TOOL_RAN) return;
  // Paths relative to the workspace; at most `max` lines in all; only granted files.
  std::string text;
  uint32_t n = 0;
  const std::string prefix = absl::StrCat(kSandboxWorkspace, "/");
  for (absl::string_view line : absl::StrSplit(out->stdout_data, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, prefix)) line.remove_prefix(prefix.size());
    absl::string_view file = line.substr(0, line.find(':'));
    if (!ReadGranted(c, std::string(file))) continue;
    if (n++ >= max) {
      c.result->set_stdout_truncated(true);
      break;
    }
    absl::StrAppend(&text, line, "\n");
  }
  c.result->set_stdout(text);
}

// Writes `content` to the granted workspace path `rel` from inside a sandbox.
void WriteInside(Call& c, const std::string& rel, const std::string& content) {
  const std::string host = absl::StrCat(c.workspace, "/", rel);
  struct stat st;
  std::string mount;
  if (lstat(host.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) {
      Fail(c.result, ReasonError("invalid_tool_call", "the path is not a regular file"));
      return;
    }
    mount = rel;
  } else {
    size_t slash = rel.rfind('/');
    mount = slash == std::string::npos ? "" : rel.substr(0, slash);
    if (!IsDir(absl::StrCat(c.workspace, "/", mount))) {
      Fail(c.result, ReasonError("invalid_tool_call", "the parent directory does not exist"));
      return;
    }
  }
  std::vector<std::string> writable;
  // Binding the workspace root itself read-write is what the "" mount means.
  writable.push_back(mount);
  // sh execs cat by the name "cat" (found on PATH).
  SandboxViewResolver resolver(c.workspace);
  auto cat = resolver.Resolve("cat", kSandboxWorkspace);
  std::vector<ExpectedExec> also;
  if (cat.ok()) also.push_back({*cat, {"cat"}});
  (void)RunFixed(c, {"sh", "-c", "cat > \"$1\"", "sh", InSandbox(rel)}, writable, content,
                 std::move(also));
}

absl::optional<std::string> WritablePath(Call& c, const std::string& path) {
  auto rel = ToolPath(c, path);
  if (!rel) return absl::nullopt;
  if (!WriteGranted(c, *rel)) {
    Deny(c.result, absl::StrCat("rule:grant: ", rel->substr(0, 200), " is not granted for writing"));
    return absl::nullopt;
  }
  return rel;
}

void RunWriteFile(Call& c) {
  auto rel = WritablePath(c, c.call.write_file().path());
  if (!rel) return;
  WriteInside(c, *rel, c.call.write_file().content());
}

void RunEdit(Call& c) {
  const auto& a = c.call.edit();
  auto rel = WritablePath(c, a.path());
  if (!rel) return;
  if (a.old_text().empty()) {
    Fail(c.result, ReasonError("invalid_tool_call", "edit needs old_text"));
    return;
  }
  auto read = RunFixed(c, {"cat", "--", InSandbox(*rel)});
  if (!read.ok() || c.result->outcome() != v1::TOOL_RAN) return;
  if (read->exit_code != 0 || read->stdout_truncated) {
    c.result->set_exit_code(read->exit_code ? read->exit_code : 1);
    if (read->stdout_truncated) c.result->set_stderr("edit: the file exceeds the output cap\n");
    c.result->clear_stdout();
    return;
  }
  std::string text = read->stdout_data;
  size_t count = 0;
  for (size_t pos = text.find(a.old_text()); pos != std::string::npos;
       pos = text.find(a.old_text(), pos + a.old_text().size())) {
    ++count;
  }
  if (count == 0 || (count > 1 && !a.replace_all())) {
    c.result->set_exit_code(1);
    c.result->clear_stdout();
    c.result->set_stderr(count == 0 ? "edit: old_text not found\n"
                                    : "edit: old_text is not unique (set replace_all)\n");
    return;
  }
  std::string out;
  size_t from = 0;
  for (size_t pos = text.find(a.old_text()); pos != std::string::npos;
       pos = text.find(a.old_text(), from)) {
    out.append(text, from, pos - from);
    out.append(a.new_text());
    from = pos + a.old_text().size();
    if (!a.replace_all()) break;
  }
  out.append(text, from, std::string::npos);
  c.result->Clear();
  c.result->set_call_id(c.call.call_id());
  c.result->set_task_id(c.call.task_id());
  WriteInside(c, *rel, out);
}

}  // namespace

IsolationLimits EffectiveLimits(const v1::ToolLimits& q, const SandboxOptions& o) {
  const IsolationLimits& d = o.defaults;
  const IsolationLimits& m = o.ceiling;
  IsolationLimits l;
  l.wall_ms = Pick(q.wall_ms(), d.wall_ms, m.wall_ms);
  l.cpu_seconds = Pick(q.cpu_seconds(), d.cpu_seconds, m.cpu_seconds);
  l.address_space_bytes = Pick<uint64_t>(q.address_space_bytes(), d.address_space_bytes,
                                         m.address_space_bytes);
  l.max_processes = Pick(q.max_processes(), d.max_processes, m.max_processes);
  l.max_file_bytes = Pick<uint64_t>(q.max_file_bytes(), d.max_file_bytes, m.max_file_bytes);
  l.max_open_files = Pick(q.max_open_files(), d.max_open_files, m.max_open_files);
  l.stdout_cap_bytes = Pick<uint64_t>(q.stdout_cap_bytes(), d.stdout_cap_bytes, m.stdout_cap_bytes);
  l.stderr_cap_bytes = Pick<uint64_t>(q.stderr_cap_bytes(), d.stderr_cap_bytes, m.stderr_cap_bytes);
  l.tmp_bytes = Pick<uint64_t>(q.tmp_bytes(), d.tmp_bytes, m.tmp_bytes);
  // Below these a sandbox cannot start at all.
  l.max_processes = std::max<uint32_t>(l.max_processes, 4);
  l.max_open_files = std::max<uint32_t>(l.max_open_files, 16);
  l.address_space_bytes = std::max<uint64_t>(l.address_space_bytes, 64ull << 20);
  l.cpu_seconds = std::max<uint32_t>(l.cpu_seconds, 1);
  l.tmp_bytes = std::max<uint64_t>(l.tmp_bytes, 1ull << 20);
  return l;
}

namespace {

// Calls on one workspace in this process: one that can write it (a write grant, or a
// write_file / edit call) runs alone; the others may run together. A check a call
// makes of the workspace (an operand's links, the file an exec runs) then holds while
// it runs, as far as this service's calls go (a red team had one call flip a link
// while another's cat read through it). Striped by the workspace's path: two
// workspaces that share a stripe only wait for each other.
std::shared_mutex& WorkspaceLock(const std::string& workspace) {
  static std::shared_mutex* stripes = new std::shared_mutex[64];
  return stripes[std::hash<std::string>()(workspace) % 64];
}

bool WritesWorkspace(const v1::ToolCall& call) {
  return call.grant().write_paths_size() > 0 || call.has_write_file() || call.has_edit();
}

}  // namespace

v1::ToolResult Sandbox::Run(const v1::ToolCall& call) const {
  v1::ToolResult result;
  result.set_call_id(call.call_id());
  result.set_task_id(call.task_id());
  char real[PATH_MAX];
  if (call.workspace().empty() || call.workspace()[0] != '/' ||
      call.workspace().find('\0') != std::string::npos ||
      realpath(call.workspace().c_str(), real) == nullptr || !IsDir(real)) {
    Fail(&result, ReasonError("invalid_tool_call", "workspace must be an existing absolute directory"));
    return result;
  }
  if (absl::Status where = CheckWorkspace(real, options_.workspace_roots, options_.fallback_uid,
                                         options_.fallback_gid);
      !where.ok()) {
    Fail(&result, where);
    return result;
  }
  Call c{call, options_, real, EffectiveLimits(call.limits(), options_), &result};
  std::shared_mutex& lock = WorkspaceLock(real);
  std::unique_lock<std::shared_mutex> exclusive(lock, std::defer_lock);
  std::shared_lock<std::shared_mutex> shared(lock, std::defer_lock);
  if (WritesWorkspace(call)) {
    exclusive.lock();
  } else {
    shared.lock();
  }
  switch (call.tool_case()) {
    case v1::ToolCall::kExec: RunExec(c); break;
    case v1::ToolCall::kReadFile: RunReadFile(c); break;
    case v1::ToolCall::kListDir: RunListDir(c); break;
    case v1::ToolCall::kGlob: RunGlob(c); break;
    case v1::ToolCall::kGrep: RunGrep(c); break;
    case v1::ToolCall::kWriteFile: RunWriteFile(c); break;
    case v1::ToolCall::kEdit: RunEdit(c); break;
    default:
      Fail(&result, ReasonError("invalid_tool_call", "the call names no tool"));
  }
  if (result.outcome() == v1::TOOL_OUTCOME_UNSPECIFIED) {
    Fail(&result, ReasonError("internal", "no outcome"));
  }
  return result;
}

}  // namespace gantry::sandbox
