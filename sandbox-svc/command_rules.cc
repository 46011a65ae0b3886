#include "sandbox-svc/command_rules.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "sandbox-svc/program_words.h"

namespace gantry::sandbox {
namespace {

using programs::Argv;
using programs::Basename;
using programs::Inner;
using programs::IsAssignment;
using programs::IsKnownApplet;
using programs::Short;
using programs::Tail;
using programs::Taint;
using programs::Unwrapped;
using programs::UnwrapProgram;
using programs::WordsFrom;

constexpr int kMaxDepth = 8;

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

// Where in the chain a program is decided.
struct Frame {
  std::string cwd;
  bool relative_ok = true;
  int depth = 0;
  bool outermost = true;
  bool input_tail = false;
  Taint taint;
};

// "" when allowed, else the reason (with its "rule:<id>: " prefix).
std::string Decide(Ctx& ctx, const Argv& argv, const Frame& f) {
  if (argv.empty()) return "rule:default-deny: empty command";
  if (f.depth > kMaxDepth) return "rule:default-deny: wrappers nested too deeply";
  const std::string& name = argv[0];
  if (absl::StrContains(name, "{}") || f.taint.In(name)) {
    return "rule:default-deny: the program name comes from input";
  }
  if (!f.relative_ok && absl::StrContains(name, '/') && !absl::StartsWith(name, "/")) {
    return "rule:default-deny: a relative program path after a directory change";
  }
  auto resolved = ctx.resolver.Resolve(name, f.cwd);
  if (!resolved.ok()) {
    return absl::StrCat("rule:default-deny: ", Short(name), ": not found in the sandbox");
  }
  const std::string& exe = *resolved;
  // Multi-call binaries behave as the name they are run under says (argv[0]), not as
  // the file is named: decide what the name makes them.
  Argv av = argv;          // the command as decided (and, outermost, as run)
  std::string behaves_as = Basename(exe);
  bool applet = false;     // av[1] is a busybox applet name
  const std::string kind = ctx.resolver.MultiCallKind(exe);
  if (kind == "git") {
    behaves_as = "git";
    const std::string called = Basename(name);
    if (absl::StartsWith(called, "git-")) {  // git-<cmd> is `git <cmd>` (no global options)
      if (called.size() == 4) return "rule:default-deny: git run under the name 'git-'";
      av = {name, called.substr(4)};
      av.insert(av.end(), argv.begin() + 1, argv.end());
    }
  } else if (kind == "busybox") {
    std::string called = Basename(name);
    if (absl::StartsWith(called, "-")) called.erase(0, 1);  // a login shell's "-sh"
    Argv rest = WordsFrom(argv, 1);
    if (absl::StartsWith(called, "busybox")) {
      if (argv.size() < 2 || absl::StartsWith(argv[1], "-")) {
        return absl::StrCat("rule:default-deny: ", exe,
                            ": busybox without an applet (its own options are not modelled)");
      }
      called = Basename(argv[1]);
      rest = WordsFrom(argv, 2);
    }
    if (called != Basename(exe) && Basename(exe) != "busybox") {
      // A busybox installed under another applet's name: decide as the named program.
      Argv as = {called};
      as.insert(as.end(), rest.begin(), rest.end());
      Frame g = f;
      ++g.depth;
      return Decide(ctx, as, g);
    }
    if (!IsKnownApplet(called)) {
      return absl::StrCat("rule:default-deny: ", exe, ": busybox applet '", Short(called),
                          "' is not modelled");
    }
    behaves_as = called;
    if (Basename(exe) == "busybox") {
      applet = true;
      av = {name, called};
      av.insert(av.end(), rest.begin(), rest.end());
    }
  }
  ctx.d->chain.push_back(exe);
  ctx.d->resolved_executable = exe;
  if (f.outermost) {
    ctx.d->argv = av;
    ctx.d->argv[0] = exe;
  }
  std::string named_by, denial;
  if (!ctx.rules.Names(exe, &named_by, &denial)) return denial;
  // The program's own words; a busybox applet's are the applet name and what follows.
  const Argv program = applet ? WordsFrom(av, 1) : av;
  Unwrapped u = UnwrapProgram(behaves_as, program);
  auto deny = [&](absl::string_view why) {
    return absl::StrCat("rule:", named_by, ": ", behaves_as, ": ", why);
  };
  if (!u.error.empty()) return deny(u.error);
  if (applet) u.own.insert(u.own.begin(), av[1]);
  // Input that xargs or find substitutes must not choose what a runner runs: not in a
  // text it parses as a command, and (xargs' replace string, any text at all) not in
  // its own options and operands. The words of the commands it runs are checked there.
  if (!f.taint.strings.empty()) {
    for (const auto& text : u.reparsed) {
      if (f.taint.In(text)) return deny("input would be substituted into a text it runs");
    }
    if (f.taint.any_text && u.runner) {
      for (const Argv* words : {&u.own, &u.global_flags}) {
        for (const auto& w : *words) {
          if (f.taint.In(w)) return deny("input would be substituted into its own words");
        }
      }
    }
  }
  if (f.input_tail) {
    if (u.tail == Tail::kDenied) {
      return deny("xargs would append input words that can reach its options");
    }
    if (u.tail == Tail::kToCommand && (u.inner.empty() || u.default_command)) {
      return deny("xargs would append input words where it takes the program to run");
    }
  }
  std::string allowed_by;
  std::string why =
      ctx.rules.Check(exe, u.global_flags, u.own, f.cwd, ctx.resolver, &allowed_by);
  if (!why.empty()) return why;
  ctx.d->rule_id = allowed_by;
  for (size_t k = 0; k < u.inner.size(); ++k) {
    const Inner& in = u.inner[k];
    Frame g;
    g.cwd = JoinCwd(f.cwd, in.cwd);
    g.relative_ok = f.relative_ok && in.relative_ok;
    g.depth = f.depth + 1;
    g.outermost = false;
    // Appended words reach the command a wrapper runs (the last, the one at the end).
    g.input_tail = in.input_tail ||
                   (f.input_tail && u.tail == Tail::kToCommand && k + 1 == u.inner.size());
    g.taint = f.taint;  // the same words reach the inner command
    g.taint.any_text = f.taint.any_text || in.taint.any_text;
    g.taint.strings.insert(g.taint.strings.end(), in.taint.strings.begin(),
                           in.taint.strings.end());
    std::string why = Decide(ctx, in.argv, g);
    if (!why.empty()) return why;
  }
  if (!u.inner.empty()) ctx.d->resolved_executable = ctx.d->chain.back();
  return "";
}

}  // namespace

bool IsDeniedEnvName(absl::string_view name) {
  static const std::set<std::string> kDenied = {
      // How programs are found, loaded and started.
      "PATH", "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "IFS", "PS4", "PROMPT_COMMAND",
      "GCONV_PATH", "HOSTALIASES", "LOCPATH", "NLSPATH", "SHELL", "ZDOTDIR",
      // Where programs read configuration that can name commands (git: ~/.gitconfig and
      // $XDG_CONFIG_HOME/git/config with core.fsmonitor, core.pager, aliases ...).
      "HOME", "XDG_CONFIG_HOME", "XDG_CONFIG_DIRS", "OPENSSL_CONF", "OPENSSL_ENGINES",
      "OPENSSL_MODULES", "CURL_HOME", "WGETRC", "INPUTRC", "MAKEFILES", "MAKEFLAGS", "MFLAGS",
      "GNUMAKEFLAGS", "TAR_OPTIONS", "TAPE", "RSYNC_RSH", "CVS_RSH", "SSH_ASKPASS",
      "SUDO_ASKPASS", "PAGER", "MANPAGER", "EDITOR", "VISUAL", "BROWSER", "LESSOPEN",
      "LESSCLOSE",
      // Interpreters' start-up code, module and library paths.
      "PYTHONSTARTUP", "PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONWARNINGS",
      "PYTHONBREAKPOINT", "PYTHONPLATLIBDIR", "PYTHONEXECUTABLE", "PERL5OPT", "PERL5LIB",
      "PERLLIB", "PERL5DB", "RUBYOPT", "RUBYLIB", "RUBYSHELL", "NODE_OPTIONS", "NODE_PATH",
      "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "CLASSPATH", "TCLLIBPATH"};
  // Whole families: an interpreter adds variables faster than a list keeps up (a red
  // team used PYTHONPYCACHEPREFIX to load a committed .pyc in place of a module).
  for (absl::string_view prefix : {"LD_", "GIT_", "BASH_FUNC_", "LUA_", "PYTHON", "PERL",
                                   "RUBY", "NODE_"}) {
    if (absl::StartsWith(name, prefix)) return true;
  }
  return kDenied.count(std::string(name)) > 0;
}

absl::StatusOr<std::vector<std::string>> SplitEnvSplitString(absl::string_view text) {
  auto deny = [](absl::string_view what) {
    return Error(absl::StatusCode::kPermissionDenied, "env_split_string",
                 absl::StrCat("env -S text is denied: ", what));
  };
  if (text.size() > 65536) return deny("too long");
  if (absl::StrContains(text, '\0')) return deny("a NUL byte");
  // parse_split_string: leading white space (isspace) is skipped; nothing left, no words.
  size_t i = 0;
  while (i < text.size() && absl::ascii_isspace(text[i])) ++i;
  const absl::string_view s = text.substr(i);
  // validate_split_str: every backslash sequence is one env knows, even in '...'; a
  // ${NAME} would take its value from the environment, which the rules cannot see.
  bool sq = false, dq = false;
  for (size_t k = 0; k < s.size(); ++k) {
    const char c = s[k];
    if (c == '\'') {
      sq = !sq && !dq;
    } else if (c == '"') {
      dq = !sq && !dq;
    } else if (c == '\\') {
      if (k + 1 >= s.size()) return deny("a backslash at the end");
      const char next = s[k + 1];
      if (dq && next == 'c') return deny("\\c inside double quotes");
      if (!strchr("cfnrtv#$_\"'\\", next)) {
        return deny(absl::StrCat("the sequence \\", std::string(1, next)));
      }
      ++k;
    } else if (c == '$' && !sq) {
      return deny("${NAME} takes its value from the environment");
    }
  }
  if (sq || dq) return deny("an unterminated quote");
  // build_argv: ' ' and '\t' outside quotes separate words; '#' at a word's start ends
  // the text; \_ outside double quotes separates, inside is a space; \c ends the text.
  std::vector<std::string> words;
  bool sep = true;
  sq = dq = false;
  auto add = [&](char c) {
    if (sep) {
      words.emplace_back();
      sep = false;
    }
    if (c != '\0') words.back().push_back(c);
  };
  for (size_t k = 0; k < s.size(); ++k) {
    char c = s[k];
    if (c == '\'' && !dq) {
      sq = !sq;
      add('\0');
      continue;
    }
    if (c == '"' && !sq) {
      dq = !dq;
      add('\0');
      continue;
    }
    if ((c == ' ' || c == '\t') && !sq && !dq) {
      sep = true;
      continue;
    }
    if (c == '#' && sep) break;
    if (c == '\\' && !(sq && s[k + 1] != '\\' && s[k + 1] != '\'')) {
      c = s[++k];
      if (c == '\\' || c == '\'' || (!sq && (c == '#' || c == '$' || c == '"'))) {
        // as is
      } else if (c == '_') {
        if (!dq) {
          sep = true;
          continue;
        }
        c = ' ';
      } else if (c == 'c') {
        break;
      } else {
        c = c == 'f' ? '\f' : c == 'n' ? '\n' : c == 'r' ? '\r' : c == 't' ? '\t' : '\v';
      }
    }
    add(c);
  }
  return words;
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

CommandDecision DecideCommand(const CommandRuleSet& rules, const std::vector<std::string>& argv,
                              absl::string_view cwd, const ExecutableResolver& resolver) {
  CommandDecision d;
  Ctx ctx{rules, resolver, &d};
  Frame f;
  f.cwd = std::string(cwd);
  std::string why = Decide(ctx, argv, f);
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
