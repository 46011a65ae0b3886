// Wrappers and runners the sandbox models (program_words.h): env, nice and the simple
// wrappers, xargs, sh -c, find, git, tar, interpreters, and the dispatch by program.
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
#include "sandbox-svc/command_rules.h"
#include "sandbox-svc/program_words.h"

namespace gantry::sandbox::programs {
namespace {

// --- env (GNU coreutils 9) ---------------------------------------------------------

const Grammar& EnvGrammar() {
  static const Grammar g{"C:iS:u:v0",
                         {{"ignore-environment", Arity::kNone, "-i"},
                          {"null", Arity::kNone, "-0"},
                          {"unset", Arity::kRequired, "-u"},
                          {"chdir", Arity::kRequired, "-C"},
                          {"debug", Arity::kNone, "-v"},
                          {"split-string", Arity::kRequired, "-S"},
                          {"block-signal", Arity::kOptional, "--block-signal"},
                          {"default-signal", Arity::kOptional, "--default-signal"},
                          {"ignore-signal", Arity::kOptional, "--ignore-signal"},
                          {"list-signal-handling", Arity::kNone, "--list-signal-handling"},
                          {"help", Arity::kNone, "--help"},
                          {"version", Arity::kNone, "--version"}}};
  return g;
}

Unwrapped UnwrapEnv(const Argv& argv) {
  Unwrapped u;
  u.runner = true;
  u.tail = Tail::kToCommand;
  Argv a = argv;
  OptionReader r(&a, 1, EnvGrammar());
  int splits = 0;
  bool has_chdir = false;
  std::string chdir;
  Option o;
  while (true) {
    OptionReader::Result res = r.Next(&o, &u.error);
    if (res == OptionReader::kError) return u;
    if (res == OptionReader::kEnd) break;
    if (o.key == "-C") {
      has_chdir = true;
      chdir = o.value;
    }
    if (o.key != "-S") continue;
    // GNU env replaces the -S text by the words it splits into and reads options again
    // from the first of them: the text may hold options, assignments, another -S.
    if (++splits > 8) {
      u.error = "-S nested too deeply";
      return u;
    }
    u.reparsed.push_back(o.value);
    auto words = SplitEnvSplitString(o.value);
    if (!words.ok()) {
      u.error = std::string(words.status().message());
      return u;
    }
    for (size_t k = 1; k < r.index(); ++k) u.own.push_back(a[k]);  // read so far
    Argv next = {a[0]};
    next.insert(next.end(), words->begin(), words->end());
    next.insert(next.end(), a.begin() + static_cast<long>(r.index()), a.end());
    a = std::move(next);
    r.Restart(&a, 1);
  }
  size_t k = r.index();
  if (k < a.size() && a[k] == "-") ++k;  // "-" is -i
  // Any word with '=' is an assignment to env (putenv), whatever its name.
  while (k < a.size() && a[k].find('=') != std::string::npos) {
    const std::string name = a[k].substr(0, a[k].find('='));
    if (name.empty() || IsDeniedEnvName(name)) {
      u.error = absl::StrCat("setting ", name.empty() ? "''" : Short(name), " is denied");
      return u;
    }
    ++k;
  }
  for (size_t j = 1; j < k; ++j) u.own.push_back(a[j]);
  Argv command = WordsFrom(a, k);
  if (!command.empty()) {
    Inner in{command};
    if (has_chdir) {
      in.cwd = chdir;
      in.relative_ok = false;
    }
    u.inner.push_back(std::move(in));
  }
  return u;
}

// --- nice, timeout, nohup, stdbuf, setsid, ionice -----------------------------------

Unwrapped UnwrapSimple(const Argv& a, const Grammar& g, int positional_before_cmd) {
  Unwrapped u;
  u.runner = true;
  u.tail = Tail::kToCommand;
  std::vector<Option> opts;
  int i = ReadOptions(a, 1, g, &opts, &u.error);
  if (i < 0) return u;
  i += positional_before_cmd;  // e.g. timeout's DURATION
  if (static_cast<size_t>(i) > a.size()) {
    u.error = "missing operand";
    return u;
  }
  u.own.assign(a.begin() + 1, a.begin() + i);
  Argv inner = WordsFrom(a, static_cast<size_t>(i));
  if (inner.empty()) {
    u.error = "nothing to run";
    return u;
  }
  u.inner.push_back(Inner{inner});
  return u;
}

// coreutils nice: "-N", "--N", "-+N" (an adjustment) may stand wherever an option can;
// otherwise one getopt_long("+n:") option at a time.
Unwrapped UnwrapNice(const Argv& a) {
  static const Grammar g{"n:", {{"adjustment", Arity::kRequired, "-n"},
                                {"help", Arity::kNone, "--help"},
                                {"version", Arity::kNone, "--version"}}};
  Unwrapped u;
  u.runner = true;
  u.tail = Tail::kToCommand;
  size_t i = 1;
  while (i < a.size()) {
    const std::string& s = a[i];
    const size_t d = s.size() > 1 && (s[1] == '-' || s[1] == '+') ? 2 : 1;
    if (s.size() > d && s[0] == '-' && absl::ascii_isdigit(s[d])) {
      ++i;
      continue;
    }
    OptionReader r(&a, i, g);
    Option o;
    OptionReader::Result res = r.Next(&o, &u.error);
    if (res == OptionReader::kError) return u;
    i = r.index();
    if (res == OptionReader::kEnd) break;
  }
  u.own.assign(a.begin() + 1, a.begin() + static_cast<long>(i));
  Argv inner = WordsFrom(a, i);
  if (inner.empty()) {
    u.error = "nothing to run";
    return u;
  }
  u.inner.push_back(Inner{inner});
  return u;
}

// --- xargs (GNU findutils 4.9) ------------------------------------------------------

const Grammar& XargsGrammar() {
  static const Grammar g{"0a:d:E:e::I:i::l::L:n:oprs:txP:",
                         {{"null", Arity::kNone, "-0"},
                          {"arg-file", Arity::kRequired, "-a"},
                          {"delimiter", Arity::kRequired, "-d"},
                          {"eof", Arity::kOptional, "-e"},
                          {"replace", Arity::kOptional, "-i"},
                          {"max-lines", Arity::kOptional, "-l"},
                          {"max-args", Arity::kRequired, "-n"},
                          {"open-tty", Arity::kNone, "-o"},
                          {"interactive", Arity::kNone, "-p"},
                          {"no-run-if-empty", Arity::kNone, "-r"},
                          {"max-chars", Arity::kRequired, "-s"},
                          {"verbose", Arity::kNone, "-t"},
                          {"show-limits", Arity::kNone, "--show-limits"},
                          {"exit", Arity::kNone, "-x"},
                          {"max-procs", Arity::kRequired, "-P"},
                          {"process-slot-var", Arity::kRequired, "--process-slot-var"},
                          {"version", Arity::kNone, "--version"},
                          {"help", Arity::kNone, "--help"}}};
  return g;
}

Unwrapped UnwrapXargs(const Argv& a) {
  Unwrapped u;
  u.runner = true;
  u.tail = Tail::kToCommand;
  std::vector<Option> opts;
  int i = ReadOptions(a, 1, XargsGrammar(), &opts, &u.error);
  if (i < 0) return u;
  // Replace mode, as xargs' option loop leaves it: -I/-i set it (and clear -n/-L),
  // -L/-l clear it, -n clears it unless it is 1.
  std::string replace;
  Taint taint;
  taint.any_text = true;
  for (const Option& o : opts) {
    if (o.key == "-I" || o.key == "-i") {
      replace = o.has_value ? o.value : "{}";
      if (replace.empty()) {
        u.error = "an empty replace string";
        return u;
      }
      taint.strings.push_back(replace);
    } else if (o.key == "-L" || o.key == "-l") {
      replace.clear();
    } else if (o.key == "-n") {
      int n = 0;
      if (!(absl::SimpleAtoi(o.value, &n) && n == 1)) replace.clear();
    } else if (o.key == "--process-slot-var") {
      if (o.value.empty() || o.value.find('=') != std::string::npos || IsDeniedEnvName(o.value)) {
        u.error = absl::StrCat("--process-slot-var ", Short(o.value), " is denied");
        return u;
      }
    }
  }
  u.own.assign(a.begin() + 1, a.begin() + i);
  Argv inner = WordsFrom(a, static_cast<size_t>(i));
  if (inner.empty()) {
    inner = {"echo"};
    u.default_command = true;
  }
  // Without a replace string, xargs appends the words it reads to the command.
  u.inner.push_back(Inner{inner, "", true, replace.empty(), taint});
  return u;
}

// --- sh -c ------------------------------------------------------------------------

Unwrapped UnwrapShell(const Argv& a) {
  Unwrapped u;
  u.runner = true;
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
  u.reparsed.push_back(a[i]);
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
  u.inner.push_back(Inner{inner});
  return u;
}

// --- find -exec/-execdir/-ok/-okdir (GNU findutils) -----------------------------------

bool IsFindExpressionStart(absl::string_view w) {
  return (w.size() > 1 && w[0] == '-') || w == "(" || w == "!" || w == ")" || w == ",";
}

Unwrapped UnwrapFind(const Argv& a) {
  Unwrapped u;
  u.runner = true;
  u.tail = Tail::kDenied;
  // Start points: the words before the expression (after -H/-L/-P/-D/-O options).
  size_t i = 1;
  while (i < a.size() && (a[i] == "-H" || a[i] == "-L" || a[i] == "-P" ||
                          absl::StartsWith(a[i], "-O") || a[i] == "-D")) {
    if (a[i] == "-D") ++i;
    ++i;
  }
  std::vector<std::string> starts;
  for (size_t k = i; k < a.size() && !IsFindExpressionStart(a[k]); ++k) {
    if (a[k] == "--") continue;
    starts.push_back(a[k]);
  }
  if (starts.empty()) starts.push_back(".");
  Taint braces;
  braces.strings = {"{}"};
  for (size_t k = 1; k < a.size(); ++k) {
    const std::string& w = a[k];
    u.own.push_back(w);
    const bool dir = w == "-execdir" || w == "-okdir";
    const bool plus_ok = w == "-exec" || w == "-execdir";
    if (!(w == "-exec" || w == "-ok" || dir)) continue;
    // The command ends at ";", or (-exec/-execdir) at "+" right after a word holding
    // "{}"; any other "+" is an ordinary argument.
    Argv cmd;
    size_t j = k + 1;
    bool saw_braces = false, ended = false, plus = false;
    int brace_words = 0;
    std::string brace_word;
    for (; j < a.size(); ++j) {
      if (a[j] == ";") {
        ended = true;
        break;
      }
      if (plus_ok && a[j] == "+" && saw_braces) {
        ended = plus = true;
        break;
      }
      saw_braces = absl::StrContains(a[j], "{}");
      if (saw_braces) {
        ++brace_words;
        brace_word = a[j];
      }
      cmd.push_back(a[j]);
    }
    if (!ended) {
      u.error = absl::StrCat(w, " without its terminating ';'", plus_ok ? " or '{} +'" : "");
      return u;
    }
    if (plus && (brace_words != 1 || brace_word != "{}")) {
      u.error = absl::StrCat(w, " ... {} + needs one '{}' standing by itself");  // find refuses it
      return u;
    }
    if (cmd.empty()) {
      u.error = absl::StrCat(w, " without a command");
      return u;
    }
    if (dir && absl::StrContains(cmd[0], '/') && !absl::StartsWith(cmd[0], "/")) {
      u.error = absl::StrCat(w, " with a relative program path");
      return u;
    }
    if (dir) {
      // Run in the directory of each file found: decided in each start point (relative
      // operands are then read against the tree find walks, not find's own directory).
      for (const auto& s : starts) u.inner.push_back(Inner{cmd, s, false, false, braces});
    } else {
      u.inner.push_back(Inner{cmd, "", true, false, braces});
    }
    k = j;
  }
  return u;
}

// --- git ----------------------------------------------------------------------------

// git's global options are exact words (git.c handle_options, not getopt): no
// abbreviations. A prefix of an option is named here only to say why it is denied.
std::string GitGlobalDenial(absl::string_view word) {
  const absl::string_view name = word.substr(0, word.find('='));
  static constexpr const char* kRunsPrograms[] = {"--config-env", "--exec-path"};
  static constexpr const char* kChoosesRepository[] = {
      "--git-dir", "--work-tree", "--bare", "--namespace", "--super-prefix", "--attr-source",
      "--shallow-file"};
  if (absl::StartsWith(word, "-c")) return "-c can run any program and is always denied";
  auto hit = [&](const char* full) {
    return name == full || (name.size() >= 4 && absl::StartsWith(full, name));
  };
  for (const char* f : kRunsPrograms) {
    if (hit(f)) return absl::StrCat(f, " can run any program and is always denied");
  }
  for (const char* f : kChoosesRepository) {
    if (hit(f)) {
      return absl::StrCat(f,
                          " chooses the repository (and so the configuration that runs "
                          "programs) and is always denied");
    }
  }
  return "";
}

Unwrapped UnwrapGit(const Argv& a) {
  Unwrapped u;
  u.runner = true;
  u.tail = Tail::kDenied;
  static const std::set<std::string> kFlags = {
      "-p", "-P", "--paginate", "--no-pager", "--no-replace-objects", "--no-lazy-fetch",
      "--literal-pathspecs", "--glob-pathspecs", "--noglob-pathspecs", "--icase-pathspecs",
      "--no-optional-locks", "--no-advice"};
  // git.c: these end the options and become the command (`git --help status` runs
  // `git help status`), so they are decided as that subcommand.
  static const std::map<std::string, std::string> kAsCommand = {
      {"--version", "version"}, {"-v", "version"}, {"--help", "help"}, {"-h", "help"}};
  // These print something and exit: git runs none of the words after them, so a
  // subcommand there would be checked but never run.
  static const std::set<std::string> kPrintAndExit = {"--exec-path", "--html-path",
                                                      "--man-path", "--info-path"};
  size_t i = 1;
  for (; i < a.size() && IsFlag(a[i]); ++i) {
    if (auto as = kAsCommand.find(a[i]); as != kAsCommand.end()) {
      u.own = {as->second};
      u.own.insert(u.own.end(), a.begin() + static_cast<long>(i) + 1, a.end());
      return u;
    }
    if (kPrintAndExit.count(a[i]) || absl::StartsWith(a[i], "--list-cmds=")) {
      u.error = absl::StrCat("git option ", Short(a[i]),
                             " prints and exits without running a subcommand; it is denied");
      return u;
    }
    std::string why = GitGlobalDenial(a[i]);
    if (!why.empty()) {
      u.error = absl::StrCat("git option ", why);
      return u;
    }
    u.global_flags.push_back(a[i]);
    if (kFlags.count(a[i])) continue;
    if (a[i] == "-C") {
      if (i + 1 >= a.size()) {
        u.error = "option -C needs a value";
        return u;
      }
      u.global_flags.push_back(a[++i]);
      continue;
    }
    u.error = absl::StrCat("git option '", Short(a[i]), "' is not understood");
    return u;
  }
  // The subcommand and its words (-C's directory went with the global options).
  u.own.assign(a.begin() + static_cast<long>(i), a.end());
  return u;
}

// --- tar (GNU tar): options that run a command through /bin/sh -c ----------------------

Unwrapped UnwrapTar(const Argv& a) {
  Unwrapped u;
  u.runner = true;
  u.tail = Tail::kDenied;
  u.own.assign(a.begin() + 1, a.end());
  // Short options that take a value (GNU tar 1.34): the rest of a dash cluster or the
  // next word; in the old style (first word without '-') the next words in order. A
  // value is read but the word is still scanned as an option (tar may not take it as a
  // value; scanning it anyway can only deny more).
  static constexpr char kValued[] = "bCfFgHIKLNTVX";
  static constexpr const char* kCommands[] = {"--to-command", "--use-compress-program",
                                              "--info-script", "--new-volume-script",
                                              "--checkpoint-action"};
  static constexpr const char* kRemote[] = {"--rsh-command", "--rmt-command"};
  Argv commands, archives;
  bool force_local = false, file_list = false, verbatim = false;
  auto next_word = [&](size_t i) -> std::optional<std::string> {
    if (i + 1 < a.size()) return a[i + 1];
    return std::nullopt;
  };
  auto short_value = [&](char c, const std::string& v) {
    if (c == 'I' || c == 'F') commands.push_back(v);
    if (c == 'f') archives.push_back(v);
    if (c == 'T') file_list = true;
  };
  size_t i = 1;
  if (i < a.size() && !a[i].empty() && a[i][0] != '-') {  // old style: "xzf a.tar"
    size_t next = 2;
    for (char c : a[1]) {
      if (!strchr(kValued, c)) continue;
      if (next >= a.size()) {
        u.error = absl::StrCat("option ", std::string(1, c), " needs a value");
        return u;
      }
      short_value(c, a[next++]);
    }
    i = 2;
  }
  for (; i < a.size(); ++i) {
    const std::string& w = a[i];
    if (w == "--") break;
    if (absl::StartsWith(w, "--")) {
      const size_t eq = w.find('=');
      const std::string name = w.substr(0, eq);
      const std::optional<std::string> value =
          eq != std::string::npos ? std::optional<std::string>(w.substr(eq + 1)) : next_word(i);
      // A unique prefix is the option (argp); "--checkpoint" is an option of its own.
      auto prefix_of = [&](const char* full) {
        return name.size() >= 3 && absl::StartsWith(full, name) && name != "--checkpoint";
      };
      if (name == "--force-local") force_local = true;
      if (name == "--verbatim-files-from") verbatim = true;
      if (name.size() >= 7 && absl::StartsWith("--files-from", name)) file_list = true;
      for (const char* r : kRemote) {
        if (prefix_of(r)) {
          u.error = absl::StrCat(r, " runs a remote-shell program and is denied");
          return u;
        }
      }
      if (name.size() >= 4 && absl::StartsWith("--file", name) && value) archives.push_back(*value);
      for (const char* c : kCommands) {
        if (!prefix_of(c)) continue;
        if (!value) {
          u.error = absl::StrCat("option ", c, " needs a value");
          return u;
        }
        if (std::string(c) != "--checkpoint-action") {
          commands.push_back(*value);
        } else if (absl::StartsWith(*value, "exec")) {
          if (!absl::StartsWith(*value, "exec=")) {
            u.error = "--checkpoint-action exec without a command";
            return u;
          }
          commands.push_back(value->substr(5));
        }
      }
      continue;
    }
    if (w.size() > 1 && w[0] == '-') {
      for (size_t p = 1; p < w.size(); ++p) {
        if (!strchr(kValued, w[p])) continue;
        std::optional<std::string> v =
            p + 1 < w.size() ? std::optional<std::string>(w.substr(p + 1)) : next_word(i);
        if (!v) {
          u.error = absl::StrCat("option -", std::string(1, w[p]), " needs a value");
          return u;
        }
        short_value(w[p], *v);
        break;
      }
    }
  }
  if (file_list && !verbatim) {
    u.error = "a file list (-T) may hold options, which the rules do not see "
              "(give --verbatim-files-from)";
    return u;
  }
  for (const auto& f : archives) {
    const size_t colon = f.find(':');
    if (!force_local && colon != std::string::npos && f.find('/') > colon) {
      u.error = absl::StrCat("archive '", Short(f), "' is remote (tar runs rsh for it)");
      return u;
    }
  }
  for (auto& c : commands) {
    u.reparsed.push_back(c);
    u.inner.push_back(ShellCommand(c));
  }
  return u;
}

}  // namespace

// --- interpreters: inline code is an operand ----------------------------------------------

// For an interpreter's short options whose value is code or a module to load, an
// attached value ("-cCODE", "-Mstrict;system(1)") is split into a word of its own, so
// that the rule's operand patterns see it as they see "-c CODE". The program still runs
// with its words as given.
struct InterpreterGrammar {
  const char* no_value;  // options without a value
  const char* code;      // options whose attached value is split out
  const char* digits;    // options whose attached value is digits only (perl -l, -0)
  const char* stops;     // options after which the words are the program's arguments
};

const InterpreterGrammar* InterpreterOf(absl::string_view base) {
  static const InterpreterGrammar kPython{"bBdEhiIOPqsSuvVx", "cmWX", "", "cm"};
  static const InterpreterGrammar kPerl{"acnpstTuUwWXhvS", "eEMmIdFxiCDV", "l0", ""};
  static const InterpreterGrammar kRuby{"acdlnpsSvwyh", "erICEFixW", "0", ""};
  static const InterpreterGrammar kNode{"hvic", "eprP", "", ""};
  static const InterpreterGrammar kLua{"ivEW", "el", "", ""};
  if (absl::StartsWith(base, "python")) return &kPython;
  if (absl::StartsWith(base, "perl")) return &kPerl;
  if (absl::StartsWith(base, "ruby")) return &kRuby;
  if (base == "node" || base == "nodejs") return &kNode;
  if (absl::StartsWith(base, "lua")) return &kLua;
  return nullptr;
}

Unwrapped UnwrapInterpreter(const Argv& a, const InterpreterGrammar& g) {
  Unwrapped u;
  u.runner = true;  // its code says what it runs
  size_t i = 1;
  bool stopped = false;
  for (; i < a.size() && !stopped; ++i) {
    const std::string& w = a[i];
    if (w == "--" || !IsFlag(w)) break;
    if (absl::StartsWith(w, "--")) {
      const size_t eq = w.find('=');
      if (eq != std::string::npos) {
        u.own.push_back(w.substr(0, eq));
        u.own.push_back(w.substr(eq + 1));
      } else {
        u.own.push_back(w);
      }
      continue;
    }
    bool split = false;
    for (size_t p = 1; p < w.size(); ++p) {
      const char c = w[p];
      if (strchr(g.no_value, c)) continue;
      if (strchr(g.digits, c)) {
        // Octal digits; perl's -0 also takes x and hex digits.
        const bool hex = c == '0' && p + 1 < w.size() && w[p + 1] == 'x';
        if (hex) ++p;
        while (p + 1 < w.size() && (hex ? absl::ascii_isxdigit(w[p + 1])
                                        : w[p + 1] >= '0' && w[p + 1] <= '7')) {
          ++p;
        }
        continue;
      }
      if (strchr(g.code, c)) {
        stopped = strchr(g.stops, c) != nullptr;
        if (p + 1 < w.size()) {
          u.own.push_back(w.substr(0, p + 1));
          u.own.push_back(w.substr(p + 1));
          split = true;
        }
      }
      break;  // a valued option (or an unknown one) takes the rest of the word
    }
    if (!split) u.own.push_back(w);
  }
  // Appended words are the program's arguments once a script (or -c/-m) is given;
  // before, they would be read as its options.
  u.tail = stopped || i < a.size() ? Tail::kHarmless : Tail::kDenied;
  u.own.insert(u.own.end(), a.begin() + static_cast<long>(i), a.end());
  return u;
}

// --- programs that run a command of their arguments' choosing, not modelled -------------

bool IsUnmodelledRunner(absl::string_view base) {
  static const std::set<absl::string_view> kRunners = {
      "flock", "taskset", "chrt", "prlimit", "setpriv", "unshare", "nsenter", "chroot",
      "runuser", "su", "sudo", "doas", "pkexec", "script", "watch", "time", "strace",
      "ltrace", "valgrind", "parallel", "systemd-run", "firejail", "bwrap", "fakeroot",
      "fakechroot", "setarch", "linux32", "linux64", "numactl", "catchsegv", "unbuffer",
      "expect", "csh", "tcsh", "fish", "busybox"};
  return kRunners.count(base) > 0;
}

bool IsShell(absl::string_view base) {
  static const std::set<absl::string_view> kShells = {
      "sh", "bash", "dash", "rbash", "ash", "ksh", "mksh", "lksh", "posh", "zsh"};
  return kShells.count(base) > 0;
}

bool IsAwk(absl::string_view base) {
  return base == "awk" || base == "gawk" || base == "mawk" || base == "nawk" ||
         base == "original-awk";
}

// Busybox applets decided as busybox's rule with the applet as its first word: those
// that only work on their operands, and the wrappers modelled above.
bool IsKnownApplet(absl::string_view applet) {
  static const std::set<absl::string_view> kLeaves = {
      "cat", "ls", "head", "tail", "wc", "sort", "uniq", "cut", "tr", "echo", "printf",
      "true", "false", "pwd", "basename", "dirname", "stat", "du", "df", "md5sum",
      "sha1sum", "sha256sum", "sha512sum", "cmp", "diff", "od", "hexdump", "xxd", "grep",
      "egrep", "fgrep", "date", "sleep", "seq", "tee", "touch", "mkdir", "rmdir", "rm",
      "cp", "mv", "ln", "chmod", "readlink", "realpath", "test", "[", "[[", "expr", "yes",
      "base64", "nl", "fold", "tac", "rev", "comm", "paste", "expand", "unexpand",
      "strings", "gzip", "gunzip", "zcat", "bzip2", "bunzip2", "bzcat", "xz", "unxz",
      "xzcat", "id", "whoami", "uname", "which", "printenv", "sum", "cksum", "truncate",
      "mktemp", "dos2unix", "unix2dos"};
  static const std::set<absl::string_view> kModelled = {
      "env", "nice", "timeout", "nohup", "setsid", "xargs", "sh", "ash", "find", "tar",
      "sed", "awk"};
  return kLeaves.count(applet) > 0 || kModelled.count(applet) > 0;
}

// Wrappers that run their operands as a command after their options (and, for
// timeout, a DURATION).
struct SimpleWrapper {
  const char* name;
  int operands_before_command;
  Grammar grammar;
};

const SimpleWrapper* SimpleWrapperOf(absl::string_view base) {
  static const LongOption kHelp{"help", Arity::kNone, "--help"};
  static const LongOption kVersion{"version", Arity::kNone, "--version"};
  static const std::vector<SimpleWrapper> kWrappers = {
      {"timeout", 1, {"k:s:v", {{"kill-after", Arity::kRequired, "-k"},
                                {"signal", Arity::kRequired, "-s"},
                                {"foreground", Arity::kNone, "--foreground"},
                                {"preserve-status", Arity::kNone, "--preserve-status"},
                                {"verbose", Arity::kNone, "-v"}, kHelp, kVersion}}},
      {"nohup", 0, {"", {kHelp, kVersion}}},
      {"stdbuf", 0, {"i:o:e:", {{"input", Arity::kRequired, "-i"},
                                {"output", Arity::kRequired, "-o"},
                                {"error", Arity::kRequired, "-e"}, kHelp, kVersion}}},
      {"setsid", 0, {"cfwhV", {{"ctty", Arity::kNone, "-c"}, {"fork", Arity::kNone, "-f"},
                               {"wait", Arity::kNone, "-w"}, {"help", Arity::kNone, "-h"},
                               {"version", Arity::kNone, "-V"}}}},
      {"ionice", 0, {"c:n:thV", {{"class", Arity::kRequired, "-c"},
                                 {"classdata", Arity::kRequired, "-n"},
                                 {"ignore", Arity::kNone, "-t"}, {"help", Arity::kNone, "-h"},
                                 {"version", Arity::kNone, "-V"}}}},
  };
  for (const auto& w : kWrappers) {
    if (base == w.name) return &w;
  }
  return nullptr;
}

// The words of one program, by what it is (`base`: the program's name as it behaves).
Unwrapped UnwrapProgram(const std::string& base, const Argv& argv) {
  if (base == "env") return UnwrapEnv(argv);
  if (base == "nice") return UnwrapNice(argv);
  if (const SimpleWrapper* w = SimpleWrapperOf(base)) {
    return UnwrapSimple(argv, w->grammar, w->operands_before_command);
  }
  if (base == "xargs") return UnwrapXargs(argv);
  if (IsShell(base)) return UnwrapShell(argv);
  if (base == "find") return UnwrapFind(argv);
  if (base == "git") return UnwrapGit(argv);
  if (base == "tar" || base == "gtar") return UnwrapTar(argv);
  if (base == "sed" || base == "gsed") return UnwrapSed(argv);
  if (IsAwk(base)) return UnwrapAwk(argv);
  if (const InterpreterGrammar* g = InterpreterOf(base)) return UnwrapInterpreter(argv, *g);
  Unwrapped u;
  if (IsUnmodelledRunner(base)) {
    u.error = "it runs programs its arguments choose, which the rules do not model";
    return u;
  }
  u.own.assign(argv.begin() + 1, argv.end());
  return u;
}

}  // namespace gantry::sandbox::programs
