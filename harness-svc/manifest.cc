#include "harness-svc/manifest.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "policy/command_policy.h"
#include "yaml-cpp/eventhandler.h"
#include "yaml-cpp/yaml.h"

namespace gantry::harness {
namespace {

constexpr size_t kMaxManifestBytes = 1 << 20;
constexpr size_t kMaxGoalBytes = 64 << 10;

// A YAML node with its YAML path.
struct At {
  YAML::Node node;
  std::string path;
};

std::string Describe(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Sequence: return "a sequence";
    case YAML::NodeType::Null: return "null";
    case YAML::NodeType::Scalar: {
      std::string s = n.Scalar();
      if (s.size() > 40) s = s.substr(0, 40) + "...";
      return absl::StrCat("'", s, "'");
    }
    default: return "nothing";
  }
}

// Refuses aliases and anchors before the tree is built (an alias can multiply a small
// file into a huge tree and hides what a permission really says).
class AliasScanner : public YAML::EventHandler {
 public:
  YAML::Mark alias_mark;
  bool found = false;
  int documents = 0;
  void OnDocumentStart(const YAML::Mark&) override { ++documents; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t a) override { Check(a); }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t) override { Mark(m); }
  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t a,
                const std::string&) override {
    if (a) Mark(m);
  }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t a,
                       YAML::EmitterStyle::value) override {
    if (a) Mark(m);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t a,
                  YAML::EmitterStyle::value) override {
    if (a) Mark(m);
  }
  void OnMapEnd() override {}

 private:
  void Check(YAML::anchor_t a) {
    if (a && !found) found = true;
  }
  void Mark(const YAML::Mark& m) {
    if (!found) {
      found = true;
      alias_mark = m;
    }
  }
};

class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  absl::Status Fail(const At& at, absl::string_view what) const {
    return FailAt(at.node.Mark(), at.path, what);
  }
  absl::Status FailAt(const YAML::Mark& m, absl::string_view path, absl::string_view what) const {
    std::string where = m.is_null() ? source_ : absl::StrCat(source_, ":", m.line + 1, ":", m.column + 1);
    return Error(absl::StatusCode::kInvalidArgument, "invalid_manifest",
                 path.empty() ? absl::StrCat(where, ": ", what)
                              : absl::StrCat(where, ": ", path, ": ", what));
  }

  // A mapping with unique scalar keys, each in `allowed`; returned in file order.
  absl::StatusOr<std::vector<std::pair<std::string, At>>> Map(
      const At& at, const std::vector<absl::string_view>& allowed) const {
    if (!at.node.IsMap()) return Fail(at, absl::StrCat("expected a mapping, got ", Describe(at.node)));
    std::vector<std::pair<std::string, At>> out;
    std::set<std::string> seen;
    for (auto it = at.node.begin(); it != at.node.end(); ++it) {
      const YAML::Node& k = it->first;
      At key{k, at.path};
      if (!k.IsScalar()) return Fail(key, "mapping keys must be plain strings");
      const std::string name = k.Scalar();
      std::string child = at.path.empty() ? name : absl::StrCat(at.path, ".", name);
      bool known = false;
      for (absl::string_view a : allowed) known = known || a == name;
      if (!known) {
        return FailAt(k.Mark(), child,
                      absl::StrCat("unknown key (allowed: ", absl::StrJoin(allowed, ", "), ")"));
      }
      if (!seen.insert(name).second) return FailAt(k.Mark(), child, "duplicate key");
      out.emplace_back(name, At{it->second, child});
    }
    return out;
  }

  absl::StatusOr<std::vector<At>> Seq(const At& at) const {
    if (!at.node.IsSequence()) return Fail(at, absl::StrCat("expected a sequence, got ", Describe(at.node)));
    std::vector<At> out;
    size_t i = 0;
    for (const auto& n : at.node) out.push_back(At{n, absl::StrCat(at.path, "[", i++, "]")});
    return out;
  }

  absl::StatusOr<std::string> String(const At& at, size_t max_bytes = 4096) const {
    if (!at.node.IsScalar()) return Fail(at, absl::StrCat("expected a string, got ", Describe(at.node)));
    const std::string& s = at.node.Scalar();
    if (s.empty()) return Fail(at, "expected a non-empty string");
    if (s.size() > max_bytes) return Fail(at, absl::StrCat("longer than ", max_bytes, " bytes"));
    if (s.find('\0') != std::string::npos) return Fail(at, "contains a NUL byte");
    return s;
  }

  absl::StatusOr<int64_t> Int(const At& at, int64_t min, int64_t max) const {
    std::string expected = absl::StrCat("expected an integer in [", min, ", ", max, "]");
    if (!at.node.IsScalar() || at.node.Tag() != "?") {
      return Fail(at, absl::StrCat(expected, ", got ", Describe(at.node),
                                   at.node.IsScalar() ? " (quoted)" : ""));
    }
    int64_t v = 0;
    const std::string& s = at.node.Scalar();
    bool digits = !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || !absl::SimpleAtoi(s, &v) || v < min || v > max) {
      return Fail(at, absl::StrCat(expected, ", got ", Describe(at.node)));
    }
    return v;
  }

  absl::StatusOr<double> Number(const At& at, double min, double max) const {
    std::string expected = absl::StrCat("expected a number in [", min, ", ", max, "]");
    double v = 0;
    if (!at.node.IsScalar() || at.node.Tag() != "?" || !absl::SimpleAtod(at.node.Scalar(), &v) ||
        !std::isfinite(v) || v < min || v > max ||
        at.node.Scalar().find_first_not_of("0123456789.eE+-") != std::string::npos) {
      return Fail(at, absl::StrCat(expected, ", got ", Describe(at.node)));
    }
    return v;
  }

  absl::StatusOr<bool> Bool(const At& at) const {
    if (at.node.IsScalar() && at.node.Tag() == "?") {
      if (at.node.Scalar() == "true") return true;
      if (at.node.Scalar() == "false") return false;
    }
    return Fail(at, absl::StrCat("expected true or false, got ", Describe(at.node)));
  }

  absl::StatusOr<std::vector<std::string>> StringList(const At& at) const {
    GANTRY_ASSIGN_OR_RETURN(auto items, Seq(at));
    std::vector<std::string> out;
    for (const At& item : items) {
      GANTRY_ASSIGN_OR_RETURN(std::string s, String(item));
      for (const auto& prev : out) {
        if (prev == s) return Fail(item, absl::StrCat("duplicate value '", s, "'"));
      }
      out.push_back(std::move(s));
    }
    return out;
  }

 private:
  std::string source_;
};

// A workspace-relative path glob: no leading "/", no "." or ".." components.
absl::Status CheckGlob(const Reader& r, const At& at, const std::string& glob) {
  if (glob[0] == '/') return r.Fail(at, "path globs are relative to the workspace root (no leading '/')");
  std::stringstream parts(glob);
  std::string part;
  while (std::getline(parts, part, '/')) {
    if (part.empty() || part == "." || part == "..") {
      return r.Fail(at, absl::StrCat("'", glob, "': empty, '.' and '..' components are not allowed"));
    }
  }
  if (glob.back() == '/') return r.Fail(at, absl::StrCat("'", glob, "': trailing '/'"));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> GlobList(const Reader& r, const At& at) {
  GANTRY_ASSIGN_OR_RETURN(auto items, r.Seq(at));
  GANTRY_ASSIGN_OR_RETURN(auto globs, r.StringList(at));
  for (size_t i = 0; i < globs.size(); ++i) GANTRY_RETURN_IF_ERROR(CheckGlob(r, items[i], globs[i]));
  return globs;
}

absl::StatusOr<ModelSpec> ParseModel(const Reader& r, const At& at) {
  GANTRY_ASSIGN_OR_RETURN(auto fields, r.Map(at, {"name", "max_tokens_per_turn", "temperature"}));
  ModelSpec m;
  bool has_name = false;
  for (const auto& [key, v] : fields) {
    if (key == "name") {
      GANTRY_ASSIGN_OR_RETURN(m.name, r.String(v, 128));
      has_name = true;
    } else if (key == "max_tokens_per_turn") {
      GANTRY_ASSIGN_OR_RETURN(m.max_tokens_per_turn, r.Int(v, 1, 1 << 20));
    } else if (key == "temperature") {
      GANTRY_ASSIGN_OR_RETURN(m.temperature, r.Number(v, 0, 2));
      m.has_temperature = true;
    }
  }
  if (!has_name) return r.Fail(at, "missing required key 'name'");
  return m;
}

// One of `executables`: a command rule in the policy's form (docs/policy.md,
// grants[i].commands). What the keys may hold (a clean absolute path, globs, flags) is
// checked by the policy loader when the rules are compiled (ParsePermissions).
absl::StatusOr<policy::CommandRule> ParseExecutable(const Reader& r, const At& at) {
  if (at.node.IsMap()) {
    for (const char* old : {"id", "path", "denied_flags", "arg_patterns"}) {
      if (!at.node[old]) continue;
      return r.Fail(At{at.node[old], absl::StrCat(at.path, ".", old)},
                    "no longer accepted: an executable is a command rule of the access policy "
                    "(executable, subcommands, allowed_flags, forbidden_flags, operands: "
                    "{globs}, max_args; docs/tasks.md)");
    }
  }
  GANTRY_ASSIGN_OR_RETURN(auto fields, r.Map(at, {"executable", "subcommands", "allowed_flags",
                                                  "forbidden_flags", "operands", "max_args"}));
  policy::CommandRule rule;
  for (const auto& [key, v] : fields) {
    if (key == "executable") {
      GANTRY_ASSIGN_OR_RETURN(rule.executable, r.String(v));
    } else if (key == "subcommands") {
      GANTRY_ASSIGN_OR_RETURN(rule.subcommands, r.StringList(v));
      // An empty list would read as "no restriction" once compiled; the policy refuses it.
      if (rule.subcommands.empty()) return r.Fail(v, "expected at least one subcommand");
    } else if (key == "allowed_flags") {
      GANTRY_ASSIGN_OR_RETURN(rule.allowed_flags, r.StringList(v));
      rule.has_allowed_flags = true;
    } else if (key == "forbidden_flags") {
      GANTRY_ASSIGN_OR_RETURN(rule.forbidden_flags, r.StringList(v));
    } else if (key == "operands") {
      GANTRY_ASSIGN_OR_RETURN(auto operands, r.Map(v, {"globs"}));
      for (const auto& [k2, globs] : operands) {
        GANTRY_ASSIGN_OR_RETURN(rule.operand_globs, r.StringList(globs));
      }
      if (rule.operand_globs.empty()) return r.Fail(v, "expected globs: a non-empty list");
    } else if (key == "max_args") {
      GANTRY_ASSIGN_OR_RETURN(rule.max_args, r.Int(v, 0, 4096));
    }
  }
  if (rule.executable.empty()) return r.Fail(at, "missing required key 'executable'");
  return rule;
}

absl::StatusOr<Permissions> ParsePermissions(const Reader& r, const At& at) {
  GANTRY_ASSIGN_OR_RETURN(auto fields, r.Map(at, {"fs", "process", "network"}));
  Permissions p;
  for (const auto& [key, v] : fields) {
    if (key == "fs") {
      GANTRY_ASSIGN_OR_RETURN(auto fs, r.Map(v, {"read", "write"}));
      for (const auto& [k2, v2] : fs) {
        if (k2 == "read") {
          GANTRY_ASSIGN_OR_RETURN(p.fs_read, GlobList(r, v2));
        } else {
          GANTRY_ASSIGN_OR_RETURN(p.fs_write, GlobList(r, v2));
        }
      }
    } else if (key == "process") {
      GANTRY_ASSIGN_OR_RETURN(auto proc, r.Map(v, {"exec"}));
      for (const auto& [k2, exec] : proc) {
        GANTRY_ASSIGN_OR_RETURN(auto ef, r.Map(exec, {"rule_set", "executables"}));
        bool has_executables = false;
        for (const auto& [k3, v3] : ef) {
          if (k3 == "rule_set") {
            // A manifest author must not choose whose command grants the sandbox applies.
            return r.Fail(v3, "no longer accepted: the sandbox applies the command grants of the "
                              "principal the harness authenticates as (docs/sandbox.md, "
                              "\"Service\"); remove this key");
          } else {
            GANTRY_ASSIGN_OR_RETURN(auto items, r.Seq(v3));
            for (const At& item : items) {
              GANTRY_ASSIGN_OR_RETURN(auto rule, ParseExecutable(r, item));
              p.exec.rules.push_back(std::move(rule));
            }
            // The same loader as a policy file's: a path, glob or flag it refuses is an
            // error of the manifest, its message naming grants[0].commands[i] for
            // executables[i].
            auto compiled = policy::LoadCommandPolicy(kTaskPrincipal, p.exec.rules,
                                                      "executables");
            if (!compiled.ok()) return r.Fail(v3, std::string(compiled.status().message()));
            p.exec.policy = *compiled;
            has_executables = true;
          }
        }
        if (!has_executables) return r.Fail(exec, "missing required key 'executables'");
        p.has_exec = true;
      }
    } else if (key == "network") {
      GANTRY_ASSIGN_OR_RETURN(p.network, r.String(v));
      if (p.network != "deny") {
        return r.Fail(v, "the only value is 'deny': tools never reach the network");
      }
    }
  }
  return p;
}

absl::StatusOr<Budget> ParseBudget(const Reader& r, const At& at) {
  GANTRY_ASSIGN_OR_RETURN(auto fields,
                          r.Map(at, {"max_model_tokens", "max_tool_calls", "max_turns",
                                     "max_wall_seconds", "max_consecutive_denials",
                                     "tool_wall_ms", "max_children"}));
  Budget b;
  std::set<std::string> seen;
  for (const auto& [key, v] : fields) {
    seen.insert(key);
    if (key == "max_model_tokens") {
      GANTRY_ASSIGN_OR_RETURN(b.max_model_tokens, r.Int(v, 1, 100000000));
    } else if (key == "max_tool_calls") {
      GANTRY_ASSIGN_OR_RETURN(b.max_tool_calls, r.Int(v, 0, 100000));
    } else if (key == "max_turns") {
      GANTRY_ASSIGN_OR_RETURN(b.max_turns, r.Int(v, 1, 10000));
    } else if (key == "max_wall_seconds") {
      GANTRY_ASSIGN_OR_RETURN(b.max_wall_seconds, r.Int(v, 1, 7 * 24 * 3600));
    } else if (key == "max_consecutive_denials") {
      GANTRY_ASSIGN_OR_RETURN(b.max_consecutive_denials, r.Int(v, 1, 1000));
    } else if (key == "max_children") {
      GANTRY_ASSIGN_OR_RETURN(b.max_children, r.Int(v, 0, 100));
    } else if (key == "tool_wall_ms") {
      GANTRY_ASSIGN_OR_RETURN(b.tool_wall_ms, r.Int(v, 1, 600000));
    }
  }
  for (const char* required : {"max_model_tokens", "max_tool_calls", "max_turns", "max_wall_seconds"}) {
    if (!seen.count(required)) return r.Fail(at, absl::StrCat("missing required key '", required, "'"));
  }
  return b;
}

absl::StatusOr<AcceptanceCheck> ParseCheck(const Reader& r, const At& at) {
  GANTRY_ASSIGN_OR_RETURN(auto fields,
                          r.Map(at, {"answer_contains", "exactly_n_bullets", "cited_files_were_read"}));
  if (fields.size() != 1) return r.Fail(at, "expected exactly one check per item");
  const auto& [key, v] = fields[0];
  AcceptanceCheck c;
  if (key == "answer_contains") {
    c.kind = AcceptanceCheck::Kind::kAnswerContains;
    GANTRY_ASSIGN_OR_RETURN(c.text, r.String(v));
  } else if (key == "exactly_n_bullets") {
    c.kind = AcceptanceCheck::Kind::kExactlyNBullets;
    GANTRY_ASSIGN_OR_RETURN(c.n, r.Int(v, 0, 10000));
  } else {
    c.kind = AcceptanceCheck::Kind::kCitedFilesWereRead;
    GANTRY_ASSIGN_OR_RETURN(bool on, r.Bool(v));
    if (!on) return r.Fail(v, "write 'true' or leave the check out");
  }
  return c;
}

}  // namespace

std::string AcceptanceCheck::Name() const {
  switch (kind) {
    case Kind::kAnswerContains: return "answer_contains";
    case Kind::kExactlyNBullets: return "exactly_n_bullets";
    case Kind::kCitedFilesWereRead: return "cited_files_were_read";
  }
  return "unknown";
}

absl::StatusOr<TaskManifest> ParseManifest(absl::string_view text, const std::string& source) {
  Reader r(source);
  if (text.size() > kMaxManifestBytes) {
    return r.FailAt(YAML::Mark::null_mark(), "", "larger than 1 MiB");
  }
  YAML::Node root;
  try {
    std::string owned(text);
    {
      std::stringstream in(owned);
      YAML::Parser parser(in);
      AliasScanner scan;
      // One document is all a manifest may hold: stop at the second. (yaml-cpp 0.7
      // reports empty documents without end for some malformed text, e.g. ",a".)
      while (scan.documents <= 1 && parser.HandleNextDocument(scan)) {
      }
      if (scan.found) return r.FailAt(scan.alias_mark, "", "anchors and aliases are not allowed");
      if (scan.documents > 1) return r.FailAt(YAML::Mark::null_mark(), "", "expected one YAML document");
    }
    root = YAML::Load(owned);
  } catch (const YAML::Exception& e) {
    return r.FailAt(e.mark, "", absl::StrCat("YAML syntax: ", e.msg));
  }
  TaskManifest m;
  m.source = source;
  At top{root, ""};
  try {
    GANTRY_ASSIGN_OR_RETURN(
        auto fields, r.Map(top, {"version", "name", "goal", "system_prompt", "workspace", "model",
                                 "tools", "permissions", "budget", "acceptance", "client_profile"}));
    std::set<std::string> seen;
    const At* tools_at = nullptr;
    for (const auto& [key, v] : fields) {
      seen.insert(key);
      if (key == "version") {
        GANTRY_ASSIGN_OR_RETURN(int64_t version, r.Int(v, 1, 1));
        (void)version;
      } else if (key == "name") {
        GANTRY_ASSIGN_OR_RETURN(m.name, r.String(v, 128));
      } else if (key == "goal") {
        GANTRY_ASSIGN_OR_RETURN(m.goal, r.String(v, kMaxGoalBytes));
      } else if (key == "system_prompt") {
        GANTRY_ASSIGN_OR_RETURN(m.system_prompt, r.String(v, kMaxGoalBytes));
      } else if (key == "workspace") {
        GANTRY_ASSIGN_OR_RETURN(m.workspace, r.String(v));
      } else if (key == "client_profile") {
        GANTRY_ASSIGN_OR_RETURN(m.client_profile, r.String(v, 128));
      } else if (key == "model") {
        GANTRY_ASSIGN_OR_RETURN(m.model, ParseModel(r, v));
      } else if (key == "tools") {
        GANTRY_ASSIGN_OR_RETURN(auto items, r.Seq(v));
        GANTRY_ASSIGN_OR_RETURN(m.tools, r.StringList(v));
        for (size_t i = 0; i < m.tools.size(); ++i) {
          bool known = false;
          for (const char* t : kBuiltinTools) known = known || m.tools[i] == t;
          if (!known) {
            return r.Fail(items[i], absl::StrCat("unknown tool '", m.tools[i],
                                                 "' (built-in: read_file, list_dir, glob, grep, exec, delegate_task)"));
          }
        }
        tools_at = &v;
      } else if (key == "permissions") {
        GANTRY_ASSIGN_OR_RETURN(m.permissions, ParsePermissions(r, v));
      } else if (key == "budget") {
        GANTRY_ASSIGN_OR_RETURN(m.budget, ParseBudget(r, v));
      } else if (key == "acceptance") {
        GANTRY_ASSIGN_OR_RETURN(auto items, r.Seq(v));
        for (const At& item : items) {
          GANTRY_ASSIGN_OR_RETURN(auto check, ParseCheck(r, item));
          m.acceptance.push_back(std::move(check));
        }
      }
    }
    for (const char* required : {"version", "goal", "workspace", "model", "tools", "permissions", "budget"}) {
      if (!seen.count(required)) {
        return r.Fail(top, absl::StrCat("missing required key '", required, "'"));
      }
    }
    bool exec_advertised = false, delegate_advertised = false;
    for (const auto& t : m.tools) {
      exec_advertised = exec_advertised || t == "exec";
      delegate_advertised = delegate_advertised || t == "delegate_task";
    }
    if (exec_advertised && !m.permissions.has_exec) {
      return r.Fail(*tools_at, "'exec' is advertised but permissions.process.exec is missing");
    }
    if (delegate_advertised && m.budget.max_children < 1) {
      return r.Fail(*tools_at, "'delegate_task' is advertised but budget.max_children is not set");
    }
  } catch (const YAML::Exception& e) {
    return r.FailAt(e.mark, "", absl::StrCat("YAML: ", e.msg));
  }
  return m;
}

absl::StatusOr<TaskManifest> LoadManifestFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(absl::StatusCode::kNotFound, "not_found", absl::StrCat("cannot read ", path));
  std::string text;
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxManifestBytes) break;
  }
  return ParseManifest(text, path);
}

absl::StatusOr<std::string> ResolveWorkspace(const std::string& workspace, const std::string& base_dir) {
  std::string path = workspace;
  if (path.empty() || path[0] != '/') path = absl::StrCat(base_dir.empty() ? "." : base_dir, "/", workspace);
  char real[PATH_MAX];
  if (::realpath(path.c_str(), real) == nullptr) {
    return Error(absl::StatusCode::kNotFound, "not_found",
                 absl::StrCat("workspace '", workspace, "' does not exist (", path, ")"));
  }
  struct stat st;
  if (::stat(real, &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Error(absl::StatusCode::kFailedPrecondition, "invalid_manifest",
                 absl::StrCat("workspace '", workspace, "' is not a directory"));
  }
  return std::string(real);
}

}  // namespace gantry::harness
