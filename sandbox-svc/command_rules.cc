#include "sandbox-svc/command_rules.h"

#include <fnmatch.h>

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status.h"

namespace gantry::sandbox {
namespace {

constexpr int kMaxDepth = 8;
using Argv = std::vector<std::string>;

std::string Basename(absl::string_view path) {
  size_t slash = path.rfind('/');
  return std::string(slash == absl::string_view::npos ? path : path.substr(slash + 1));
}

std::string Short(absl::string_view s) {
  return s.size() > 120 ? absl::StrCat(s.substr(0, 120), "...") : std::string(s);
}

bool IsAssignment(absl::string_view word) {
  size_t eq = word.find('=');
  if (eq == 0 || eq == absl::string_view::npos) return false;
  for (size_t i = 0; i < eq; ++i) {
    char c = word[i];
    if (!(absl::ascii_isalnum(c) || c == '_') || (i == 0 && absl::ascii_isdigit(c))) return false;
  }
  return true;
}

// A flag: starts with '-' and is not "-" alone.
bool IsFlag(absl::string_view a) { return a.size() > 1 && a[0] == '-'; }

// Whether flag `f` (before "--") hits a denied flag after normalisation.
std::string DeniedFlagHit(const ExecutableRule& rule, absl::string_view f) {
  if (rule.denied_flags.empty()) return "";
  if (absl::StartsWith(f, "--")) {
    absl::string_view name = f.substr(0, f.find('='));
    for (const auto& d : rule.denied_flags) {
      if (d == name) return d;
      if (name.size() >= 3 && absl::StartsWith(d, "--") && absl::StartsWith(d, name)) return d;
    }
    return "";
  }
  absl::string_view whole = f.substr(0, f.find('='));
  for (const auto& d : rule.denied_flags) {
    if (d == whole) return d;
  }
  for (size_t i = 1; i < f.size(); ++i) {
    const std::string one = {'-', f[i]};
    for (const auto& d : rule.denied_flags) {
      if (d == one) return d;
    }
  }
  return "";
}

// Checks `args` (argv without argv[0], after any global options that were stripped and
// passed as `global_flags`) against one rule. "" when allowed, else why not.
// Whether flag `f` is covered by rule.allowed_flags (when that list is non-empty).
bool FlagAllowed(const ExecutableRule& rule, absl::string_view f) {
  if (rule.allowed_flags.empty()) return true;
  auto listed = [&](absl::string_view x) {
    return std::find(rule.allowed_flags.begin(), rule.allowed_flags.end(), x) !=
           rule.allowed_flags.end();
  };
  absl::string_view name = f.substr(0, f.find('='));
  if (listed(name)) return true;
  if (absl::StartsWith(f, "--")) return false;
  for (size_t i = 1; i < f.size(); ++i) {
    if (!listed(std::string{'-', f[i]})) return false;
  }
  return true;
}

std::string CheckRule(const ExecutableRule& rule, const Argv& args, const Argv& global_flags) {
  if (rule.max_args >= 0 && args.size() + global_flags.size() > static_cast<size_t>(rule.max_args)) {
    return absl::StrCat("more than ", rule.max_args, " arguments");
  }
  for (const auto& g : global_flags) {
    std::string hit = DeniedFlagHit(rule, g);
    if (!hit.empty()) return absl::StrCat("flag ", hit, " is denied");
  }
  bool after_dashdash = false;
  bool seen_sub = false;
  for (const auto& a : args) {
    if (!after_dashdash && a == "--") {
      after_dashdash = true;
      continue;
    }
    if (!after_dashdash && IsFlag(a)) {
      std::string hit = DeniedFlagHit(rule, a);
      if (!hit.empty()) return absl::StrCat("flag ", hit, " is denied");
      if (!FlagAllowed(rule, a)) return absl::StrCat("flag ", Short(a), " is not allowed");
      continue;
    }
    if (!rule.subcommands.empty() && !seen_sub) {
      seen_sub = true;
      if (std::find(rule.subcommands.begin(), rule.subcommands.end(), a) ==
          rule.subcommands.end()) {
        return absl::StrCat("subcommand '", Short(a), "' is not allowed");
      }
      continue;
    }
    if (!rule.arg_patterns.empty()) {
      bool ok = false;
      for (const auto& p : rule.arg_patterns) ok = ok || fnmatch(p.c_str(), a.c_str(), 0) == 0;
      if (!ok) return absl::StrCat("argument '", Short(a), "' is not allowed");
    }
  }
  if (!rule.subcommands.empty() && !seen_sub) return "a subcommand is required";
  return "";
}

// What a wrapper's arguments split into.
struct Unwrapped {
  Argv own;                  // the wrapper's own arguments (checked against its rule)
  Argv global_flags;         // options before a subcommand (git)
  std::vector<Argv> inner;   // commands it runs
  std::string inner_cwd;     // "" = same cwd
  bool inner_relative_ok = true;
  std::string error;         // non-empty: deny with this
};

// Options taking a value (separate or attached) per wrapper; unknown options deny.
struct OptionSpec {
  std::set<std::string> flags;     // no value
  std::set<std::string> valued;    // value in the next word (or attached for short)
};

// Parses leading options of a wrapper per `spec`; returns the index of the first
// non-option word, or -1 with `error` set.
int ParseOptions(const Argv& a, size_t from, const OptionSpec& spec, std::string* error,
                 std::vector<std::pair<std::string, std::string>>* seen = nullptr) {
  size_t i = from;
  while (i < a.size()) {
    const std::string& w = a[i];
    if (w == "--") return static_cast<int>(i + 1);
    if (!IsFlag(w)) return static_cast<int>(i);
    std::string name = w, value;
    bool has_value = false;
    if (absl::StartsWith(w, "--") && w.find('=') != std::string::npos) {
      name = w.substr(0, w.find('='));
      value = w.substr(w.find('=') + 1);
      has_value = true;
    }
    if (spec.flags.count(name)) {
      if (seen) seen->emplace_back(name, "");
      ++i;
      continue;
    }
    if (spec.valued.count(name)) {
      if (!has_value) {
        if (i + 1 >= a.size()) {
          *error = absl::StrCat("option ", name, " needs a value");
          return -1;
        }
        value = a[++i];
      }
      if (seen) seen->emplace_back(name, value);
      ++i;
      continue;
    }
    // Short option with an attached value: "-n5", "-uNAME".
    if (!absl::StartsWith(w, "--") && w.size() > 2 && spec.valued.count(w.substr(0, 2))) {
      if (seen) seen->emplace_back(w.substr(0, 2), w.substr(2));
      ++i;
      continue;
    }
    *error = absl::StrCat("option '", Short(w), "' is not understood");
    return -1;
  }
  return static_cast<int>(i);
}

Argv Tail(const Argv& a, int from) {
  return from < 0 || static_cast<size_t>(from) >= a.size() ? Argv{} : Argv(a.begin() + from, a.end());
}

Unwrapped UnwrapEnv(const Argv& a) {
  Unwrapped u;
  OptionSpec spec{{"-i", "--ignore-environment", "-0", "--null", "-v", "--debug", "-"},
                  {"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}};
  std::vector<std::pair<std::string, std::string>> seen;
  int i = ParseOptions(a, 1, spec, &u.error, &seen);
  if (i < 0) return u;
  Argv prefix;
  for (const auto& [name, value] : seen) {
    if (name == "-C" || name == "--chdir") {
      u.inner_cwd = value;
      u.inner_relative_ok = false;
    }
    if (name == "-S" || name == "--split-string") {
      auto words = SplitSimpleCommand(value);
      if (!words.ok()) {
        u.error = std::string(words.status().message());
        return u;
      }
      prefix.insert(prefix.end(), words->begin(), words->end());
    }
  }
  size_t k = static_cast<size_t>(i);
  while (k < a.size() && IsAssignment(a[k])) {
    std::string name = a[k].substr(0, a[k].find('='));
    if (IsDeniedEnvName(name)) {
      u.error = absl::StrCat("setting ", name, " is denied");
      return u;
    }
    ++k;
  }
  u.own.assign(a.begin() + 1, a.begin() + static_cast<long>(k));
  Argv inner = prefix;
  inner.insert(inner.end(), a.begin() + static_cast<long>(k), a.end());
  if (!inner.empty()) u.inner.push_back(inner);
  return u;
}

Unwrapped UnwrapSimple(const Argv& a, const OptionSpec& spec, int positional_before_cmd) {
  Unwrapped u;
  int i = ParseOptions(a, 1, spec, &u.error);
  if (i < 0) return u;
  i += positional_before_cmd;  // e.g. timeout's DURATION
  if (static_cast<size_t>(i) > a.size()) {
    u.error = "missing operand";
    return u;
  }
  u.own.assign(a.begin() + 1, a.begin() + i);
  Argv inner = Tail(a, i);
  if (inner.empty()) {
    u.error = "nothing to run";
    return u;
  }
  u.inner.push_back(inner);
  return u;
}

Unwrapped UnwrapXargs(const Argv& a) {
  Unwrapped u;
  OptionSpec spec{{"-0", "--null", "-o", "--open-tty", "-p", "--interactive", "-r",
                   "--no-run-if-empty", "-t", "--verbose", "-x", "--exit", "-e", "-i", "-l"},
                  {"-a", "--arg-file", "-d", "--delimiter", "-E", "-I", "-L", "--max-lines",
                   "-n", "--max-args", "-P", "--max-procs", "-s", "--max-chars",
                   "--process-slot-var", "--eof", "--replace"}};
  std::vector<std::pair<std::string, std::string>> seen;
  int i = ParseOptions(a, 1, spec, &u.error, &seen);
  if (i < 0) return u;
  std::string replace;
  for (const auto& [name, value] : seen) {
    if (name == "-I" || name == "--replace") replace = value;
    if (name == "-i") replace = "{}";
  }
  u.own.assign(a.begin() + 1, a.begin() + i);
  Argv inner = Tail(a, i);
  if (inner.empty()) inner = {"echo"};
  if (!replace.empty() && absl::StrContains(inner[0], replace)) {
    u.error = "the program name comes from input";
    return u;
  }
  u.inner.push_back(inner);
  return u;
}

Unwrapped UnwrapShell(const Argv& a) {
  Unwrapped u;
  size_t i = 1;
  bool has_c = false;
  while (i < a.size() && IsFlag(a[i]) && !absl::StartsWith(a[i], "--")) {
    for (char c : a[i].substr(1)) {
      if (c == 'c') {
        has_c = true;
      } else if (!absl::StrContains("eux", c)) {
        u.error = absl::StrCat("shell option '", Short(a[i]), "' is not understood");
        return u;
      }
    }
    u.own.push_back(a[i]);
    ++i;
    if (has_c) break;
  }
  if (!has_c || i >= a.size()) {
    u.error = "a shell may only wrap one simple command given with -c";
    return u;
  }
  auto words = SplitSimpleCommand(a[i]);
  if (!words.ok()) {
    u.error = std::string(words.status().message());
    return u;
  }
  Argv inner = *words;
  // `exec CMD` and `command CMD` run CMD itself.
  while (!inner.empty() && (inner[0] == "exec" || inner[0] == "command")) {
    if (inner.size() > 1 && IsFlag(inner[1])) {
      u.error = absl::StrCat("'", inner[0], "' options are not understood");
      return u;
    }
    inner.erase(inner.begin());
  }
  if (inner.empty()) {
    u.error = "empty shell command";
    return u;
  }
  u.inner.push_back(inner);
  return u;
}

Unwrapped UnwrapFind(const Argv& a) {
  Unwrapped u;
  for (size_t i = 1; i < a.size(); ++i) {
    const std::string& w = a[i];
    u.own.push_back(w);
    if (w == "-exec" || w == "-execdir" || w == "-ok" || w == "-okdir") {
      Argv inner;
      size_t j = i + 1;
      for (; j < a.size() && a[j] != ";" && a[j] != "+"; ++j) inner.push_back(a[j]);
      if (j >= a.size()) {
        u.error = absl::StrCat(w, " without ';' or '+'");
        return u;
      }
      if (inner.empty()) {
        u.error = absl::StrCat(w, " without a command");
        return u;
      }
      if (absl::EndsWith(w, "dir") && absl::StrContains(inner[0], '/') &&
          !absl::StartsWith(inner[0], "/")) {
        u.error = absl::StrCat(w, " with a relative program path");
        return u;
      }
      u.inner.push_back(inner);
      i = j;
    }
  }
  return u;
}

Unwrapped UnwrapGit(const Argv& a) {
  Unwrapped u;
  static const std::set<std::string> kFlags = {
      "-p", "-P", "--paginate", "--no-pager", "--bare", "--no-replace-objects",
      "--literal-pathspecs", "--glob-pathspecs", "--noglob-pathspecs", "--icase-pathspecs",
      "--no-optional-locks", "--no-advice", "--version", "--help"};
  static const std::set<std::string> kValued = {"-C", "--git-dir", "--work-tree", "--namespace"};
  size_t i = 1;
  for (; i < a.size() && IsFlag(a[i]); ++i) {
    std::string name = a[i].substr(0, a[i].find('='));
    if (name == "-c" || name == "--config-env" || name == "--exec-path" ||
        absl::StartsWith(a[i], "-c")) {
      u.error = absl::StrCat("git option ", name.substr(0, 2) == "-c" ? "-c" : name,
                             " can run any program and is always denied");
      return u;
    }
    u.global_flags.push_back(a[i]);
    if (kFlags.count(name)) continue;
    if (kValued.count(name)) {
      if (a[i].find('=') == std::string::npos) {
        if (i + 1 >= a.size()) {
          u.error = absl::StrCat("option ", name, " needs a value");
          return u;
        }
        ++i;
      }
      continue;
    }
    u.error = absl::StrCat("git option '", Short(a[i]), "' is not understood");
    return u;
  }
  u.own.assign(a.begin() + static_cast<long>(i), a.end());
  return u;
}

// A CommandRules list as a CommandRuleSet.
class ListedRules : public CommandRuleSet {
 public:
  explicit ListedRules(const CommandRules& rules) : rules_(rules) {}

  bool Names(const std::string& exe, std::string* rule_id, std::string* denial) const override {
    for (const auto& r : rules_.executables) {
      if (r.path == exe) {
        *rule_id = r.id;
        return true;
      }
    }
    *denial = absl::StrCat("rule:default-deny: ", exe, " is not an allowed executable");
    return false;
  }

  std::string Check(const std::string& exe, const Argv& global_flags, const Argv& args,
                    absl::string_view, std::string* rule_id) const override {
    std::string first_why;
    for (const auto& r : rules_.executables) {
      if (r.path != exe) continue;
      std::string why = CheckRule(r, args, global_flags);
      if (why.empty()) {
        *rule_id = r.id;
        return "";
      }
      if (first_why.empty()) first_why = absl::StrCat("rule:", r.id, ": ", exe, ": ", why);
    }
    return first_why;
  }

 private:
  const CommandRules& rules_;
};

struct Ctx {
  const CommandRuleSet& rules;
  const ExecutableResolver& resolver;
  CommandDecision* d;
};

std::string JoinCwd(absl::string_view cwd, absl::string_view dir) {
  if (dir.empty()) return std::string(cwd);
  if (absl::StartsWith(dir, "/")) return std::string(dir);
  return absl::StrCat(cwd, "/", dir);
}

// "" when allowed, else the reason (with its "rule:<id>: " prefix).
std::string Decide(Ctx& ctx, const Argv& argv, absl::string_view cwd, bool relative_ok,
                   int depth, bool outermost) {
  if (argv.empty()) return "rule:default-deny: empty command";
  if (depth > kMaxDepth) return "rule:default-deny: wrappers nested too deeply";
  const std::string& name = argv[0];
  if (absl::StrContains(name, "{}")) {
    return "rule:default-deny: the program name comes from input";
  }
  if (!relative_ok && absl::StrContains(name, '/') && !absl::StartsWith(name, "/")) {
    return "rule:default-deny: a relative program path after a directory change";
  }
  auto resolved = ctx.resolver.Resolve(name, cwd);
  if (!resolved.ok()) {
    return absl::StrCat("rule:default-deny: ", Short(name), ": not found in the sandbox");
  }
  ctx.d->chain.push_back(*resolved);
  ctx.d->resolved_executable = *resolved;
  if (outermost) {
    ctx.d->argv = argv;
    ctx.d->argv[0] = *resolved;
  }
  std::string named_by, denial;
  if (!ctx.rules.Names(*resolved, &named_by, &denial)) return denial;
  const std::string base = Basename(*resolved);
  Unwrapped u;
  if (base == "env") {
    u = UnwrapEnv(argv);
  } else if (base == "nice") {
    u = UnwrapSimple(argv, {{}, {"-n", "--adjustment"}}, 0);
    // "-5" style adjustments are accepted by nice as a first word.
    if (!u.error.empty() && argv.size() > 2 && argv[1].size() > 1 && argv[1][0] == '-' &&
        absl::ascii_isdigit(argv[1][1])) {
      u = Unwrapped{};
      u.own = {argv[1]};
      u.inner.push_back(Argv(argv.begin() + 2, argv.end()));
    }
  } else if (base == "timeout") {
    u = UnwrapSimple(argv, {{"--preserve-status", "--foreground", "-v", "--verbose"},
                            {"-k", "--kill-after", "-s", "--signal"}}, 1);
  } else if (base == "nohup") {
    u = UnwrapSimple(argv, {}, 0);
  } else if (base == "stdbuf") {
    u = UnwrapSimple(argv, {{}, {"-i", "-o", "-e", "--input", "--output", "--error"}}, 0);
  } else if (base == "setsid") {
    u = UnwrapSimple(argv, {{"-c", "--ctty", "-f", "--fork", "-w", "--wait"}, {}}, 0);
  } else if (base == "ionice") {
    u = UnwrapSimple(argv, {{"-t", "--ignore"}, {"-c", "--class", "-n", "--classdata"}}, 0);
  } else if (base == "xargs") {
    u = UnwrapXargs(argv);
  } else if (base == "sh" || base == "bash" || base == "dash" || base == "rbash") {
    u = UnwrapShell(argv);
  } else if (base == "find") {
    u = UnwrapFind(argv);
  } else if (absl::StartsWith(base, "git")) {
    u = UnwrapGit(argv);
  } else {
    u.own.assign(argv.begin() + 1, argv.end());
  }
  if (!u.error.empty()) {
    return absl::StrCat("rule:", named_by, ": ", base, ": ", u.error);
  }
  std::string allowed_by;
  std::string why = ctx.rules.Check(*resolved, u.global_flags, u.own, cwd, &allowed_by);
  if (!why.empty()) return why;
  ctx.d->rule_id = allowed_by;
  const std::string inner_cwd = JoinCwd(cwd, u.inner_cwd);
  for (const Argv& inner : u.inner) {
    std::string why =
        Decide(ctx, inner, inner_cwd, relative_ok && u.inner_relative_ok, depth + 1, false);
    if (!why.empty()) return why;
  }
  if (!u.inner.empty()) ctx.d->resolved_executable = ctx.d->chain.back();
  return "";
}

}  // namespace

bool IsDeniedEnvName(absl::string_view name) {
  static const std::set<std::string> kDenied = {
      "PATH", "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "IFS", "PS4", "PROMPT_COMMAND",
      "GCONV_PATH", "HOSTALIASES", "LOCPATH", "NLSPATH", "PYTHONSTARTUP", "PERL5OPT",
      "NODE_OPTIONS", "RUBYOPT"};
  return kDenied.count(std::string(name)) > 0 || absl::StartsWith(name, "LD_") ||
         absl::StartsWith(name, "GIT_") || absl::StartsWith(name, "BASH_FUNC_");
}

absl::StatusOr<std::vector<std::string>> SplitSimpleCommand(absl::string_view text) {
  auto deny = [](absl::string_view what) {
    return Error(absl::StatusCode::kPermissionDenied, "not_simple_command",
                 absl::StrCat("shell text is not one simple command: ", what));
  };
  if (text.size() > 65536) return deny("too long");
  std::vector<std::string> words;
  std::string cur;
  bool in_word = false, quoted_any = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == ' ' || c == '\t') {
      if (in_word) {
        if (words.empty() && !quoted_any && IsAssignment(cur)) return deny("an assignment");
        words.push_back(cur);
        cur.clear();
        in_word = false;
        quoted_any = false;
      }
      continue;
    }
    if (c == '\'') {
      size_t end = text.find('\'', i + 1);
      if (end == absl::string_view::npos) return deny("an unterminated quote");
      cur.append(std::string(text.substr(i + 1, end - i - 1)));
      i = end;
      in_word = quoted_any = true;
      continue;
    }
    if (c == '"') {
      size_t j = i + 1;
      for (; j < text.size() && text[j] != '"'; ++j) {
        char q = text[j];
        if (q == '$' || q == '`') return deny(absl::StrCat("'", std::string(1, q), "'"));
        if (q == '\\' && j + 1 < text.size() && absl::StrContains("\"\\$`", text[j + 1])) {
          cur.push_back(text[++j]);
          continue;
        }
        if (q == '\\' && j + 1 < text.size() && text[j + 1] == '\n') return deny("a newline");
        cur.push_back(q);
      }
      if (j >= text.size()) return deny("an unterminated quote");
      i = j;
      in_word = quoted_any = true;
      continue;
    }
    if (c == '\\') {
      if (i + 1 >= text.size() || text[i + 1] == '\n') return deny("a trailing backslash");
      cur.push_back(text[++i]);
      in_word = quoted_any = true;
      continue;
    }
    if (c == '\n' || c == '\r') return deny("a newline");
    if (absl::StrContains("|&;<>()$`*?[]{}!", c)) {
      return deny(absl::StrCat("'", std::string(1, c), "'"));
    }
    if ((c == '~' || c == '#') && !in_word) return deny(absl::StrCat("'", std::string(1, c), "'"));
    if (c == '\0') return deny("a NUL byte");
    cur.push_back(c);
    in_word = true;
  }
  if (in_word) {
    if (words.empty() && !quoted_any && IsAssignment(cur)) return deny("an assignment");
    words.push_back(cur);
  }
  if (words.empty()) return deny("nothing to run");
  return words;
}

CommandDecision DecideCommand(const CommandRules& rules, const std::vector<std::string>& argv,
                              absl::string_view cwd, const ExecutableResolver& resolver) {
  return DecideCommand(ListedRules(rules), argv, cwd, resolver);
}

CommandDecision DecideCommand(const CommandRuleSet& rules, const std::vector<std::string>& argv,
                              absl::string_view cwd, const ExecutableResolver& resolver) {
  CommandDecision d;
  Ctx ctx{rules, resolver, &d};
  std::string why = Decide(ctx, argv, cwd, true, 0, true);
  if (!why.empty()) {
    d.allowed = false;
    d.reason = why;
    // "rule:<id>: ..." -> id
    absl::string_view rest = absl::string_view(why).substr(5);
    d.rule_id = std::string(rest.substr(0, rest.find(':')));
    return d;
  }
  d.allowed = true;
  return d;
}

}  // namespace gantry::sandbox
