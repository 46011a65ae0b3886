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

// ---------------------------------------------------------------------------------
// Option grammars: getopt_long(3) as the GNU wrappers call it ("+" optstring: options
// stop at the first operand), so that a wrapper's own words and the command it runs
// are split exactly as the program splits them.

enum class Arity { kNone, kRequired, kOptional };

struct LongOption {
  const char* name;  // without "--"
  Arity arity;
  const char* key;   // what the option is reported as ("-e" for --eof)
};

struct Grammar {
  const char* shorts;  // getopt(3) optstring without the leading '+': "0a:e::"
  std::vector<LongOption> longs;
};

struct Option {
  std::string key;
  std::string value;
  bool has_value = false;
};

// Reads options one at a time, as getopt_long does: clusters ("-0n1"), attached
// values ("-n1", "--max-args=1"), separate values ("-n 1") for required arguments
// only, optional arguments only attached ("-e" alone has none, "--eof" alone has none),
// unique prefixes of long options ("--max-a"), "--" ending the options.
class OptionReader {
 public:
  enum Result { kOption, kEnd, kError };

  OptionReader(const Argv* argv, size_t from, const Grammar& g) : a_(argv), i_(from), g_(g) {}
  void Restart(const Argv* argv, size_t from) {
    a_ = argv;
    i_ = from;
    pos_ = 0;
  }
  // The next word to read; after kEnd the first operand.
  size_t index() const { return i_; }
  bool ended_by_dashdash() const { return dashdash_; }

  Result Next(Option* o, std::string* error) {
    *o = Option{};
    if (pos_ > 0) return NextShort(o, error);
    dashdash_ = false;
    if (i_ >= a_->size()) return kEnd;
    const std::string& w = (*a_)[i_];
    if (w == "--") {
      ++i_;
      dashdash_ = true;
      return kEnd;
    }
    if (w.size() < 2 || w[0] != '-') return kEnd;
    if (w[1] == '-') return NextLong(o, error);
    pos_ = 1;
    return NextShort(o, error);
  }

 private:
  Result NextShort(Option* o, std::string* error) {
    const std::string& w = (*a_)[i_];
    const char c = w[pos_];
    const char* at = c == ':' ? nullptr : strchr(g_.shorts, c);
    if (at == nullptr || c == '\0') {
      *error = absl::StrCat("option '-", std::string(1, c), "' (in '", Short(w),
                            "') is not understood");
      return kError;
    }
    Arity arity = at[1] != ':' ? Arity::kNone : at[2] == ':' ? Arity::kOptional : Arity::kRequired;
    o->key = {'-', c};
    const std::string rest = w.substr(pos_ + 1);
    if (arity == Arity::kNone) {
      if (++pos_ >= w.size()) {
        pos_ = 0;
        ++i_;
      }
      return kOption;
    }
    pos_ = 0;
    ++i_;
    if (!rest.empty()) {
      o->value = rest;
      o->has_value = true;
    } else if (arity == Arity::kRequired) {
      if (i_ >= a_->size()) {
        *error = absl::StrCat("option -", std::string(1, c), " needs a value");
        return kError;
      }
      o->value = (*a_)[i_++];
      o->has_value = true;
    }
    return kOption;
  }

  Result NextLong(Option* o, std::string* error) {
    const std::string& w = (*a_)[i_];
    const size_t eq = w.find('=');
    const std::string name = w.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const LongOption* match = nullptr;
    for (const auto& l : g_.longs) {
      if (name == l.name) match = &l;
    }
    if (match == nullptr) {
      for (const auto& l : g_.longs) {
        if (name.empty() || !absl::StartsWith(l.name, name)) continue;
        if (match != nullptr && (std::string(match->key) != l.key || match->arity != l.arity)) {
          *error = absl::StrCat("option '--", Short(name), "' is ambiguous");
          return kError;
        }
        match = &l;
      }
    }
    if (match == nullptr) {
      *error = absl::StrCat("option '", Short(w), "' is not understood");
      return kError;
    }
    o->key = match->key;
    ++i_;
    if (eq != std::string::npos) {
      if (match->arity == Arity::kNone) {
        *error = absl::StrCat("option --", match->name, " takes no value");
        return kError;
      }
      o->value = w.substr(eq + 1);
      o->has_value = true;
    } else if (match->arity == Arity::kRequired) {
      if (i_ >= a_->size()) {
        *error = absl::StrCat("option --", match->name, " needs a value");
        return kError;
      }
      o->value = (*a_)[i_++];
      o->has_value = true;
    }
    return kOption;
  }

  const Argv* a_;
  size_t i_;
  size_t pos_ = 0;  // > 0: inside a short-option cluster of word i_
  bool dashdash_ = false;
  const Grammar& g_;
};

// Reads all leading options of `a` from `from`; returns the index of the first operand
// or -1 with `*error`.
int ReadOptions(const Argv& a, size_t from, const Grammar& g, std::vector<Option>* out,
                std::string* error) {
  OptionReader r(&a, from, g);
  Option o;
  while (true) {
    OptionReader::Result res = r.Next(&o, error);
    if (res == OptionReader::kError) return -1;
    if (res == OptionReader::kEnd) return static_cast<int>(r.index());
    out->push_back(o);
  }
}

// ---------------------------------------------------------------------------------
// What one program's words split into.

// Text that input substitutes into a command's words when it runs: xargs -I/-i's
// replace string (any text at all), find's "{}" (a path found under a start point).
struct Taint {
  std::vector<std::string> strings;
  bool any_text = false;
  bool In(absl::string_view word) const {
    for (const auto& t : strings) {
      if (!t.empty() && absl::StrContains(word, t)) return true;
    }
    return false;
  }
};

struct Inner {
  Argv argv;
  std::string cwd;           // "" = the wrapper's
  bool relative_ok = true;   // false: after a directory change a relative program is unknown
  bool input_tail = false;   // words read from input are appended to argv when it runs
  Taint taint;
};

// How a program treats words appended to its argv (xargs without -I).
enum class Tail {
  kHarmless,    // operands or positional parameters of a leaf program or a shell -c
  kToCommand,   // a wrapper: they go to the command it runs (none: they name a program)
  kDenied,      // they can reach options that run programs (find, git, tar, sed, awk, ...)
};

struct Unwrapped {
  Argv own;                  // the program's own words (checked against its rule)
  Argv global_flags;         // options before a subcommand (git)
  std::vector<Inner> inner;  // commands it runs
  Argv reparsed;             // texts it parses as commands (sh -c, env -S, sed/awk/tar)
  bool runner = false;       // its words choose what it runs (any wrapper or modelled runner)
  Tail tail = Tail::kHarmless;
  bool default_command = false;  // xargs without a command (it runs echo)
  std::string error;         // non-empty: deny with this
};

Argv WordsFrom(const Argv& a, size_t from) {
  return from >= a.size() ? Argv{} : Argv(a.begin() + static_cast<long>(from), a.end());
}

Inner ShellCommand(std::string text) { return Inner{{"/bin/sh", "-c", std::move(text)}}; }

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

// --- sed (GNU sed): the e command and the s///e flag run commands ----------------------

// Scans a sed script. Returns "" (with the texts of `e COMMAND` in *runs) or why not.
std::string ScanSedScript(absl::string_view s, Argv* runs) {
  size_t i = 0;
  const size_t n = s.size();
  auto blank = [&] {
    while (i < n && (s[i] == ' ' || s[i] == '\t')) ++i;
  };
  auto to_eol = [&] {
    while (i < n && s[i] != '\n') ++i;
  };
  // Up to an unescaped `delim`; false when the script ends first.
  auto delimited = [&](char delim) {
    while (i < n && s[i] != delim) {
      if (s[i] == '\\') ++i;
      if (i < n && s[i] == '\n' && delim != '\n') return false;
      ++i;
    }
    if (i >= n) return false;
    ++i;
    return true;
  };
  auto address = [&]() -> bool {
    if (i < n && absl::ascii_isdigit(s[i])) {
      while (i < n && absl::ascii_isdigit(s[i])) ++i;
      if (i < n && s[i] == '~') {
        ++i;
        while (i < n && absl::ascii_isdigit(s[i])) ++i;
      }
    } else if (i < n && s[i] == '$') {
      ++i;
    } else if (i < n && (s[i] == '/' || s[i] == '\\')) {
      char delim = '/';
      if (s[i] == '\\') {
        if (i + 1 >= n || s[i + 1] == '\n' || s[i + 1] == '\\') return false;
        delim = s[++i];
      }
      ++i;
      if (!delimited(delim)) return false;
      while (i < n && (s[i] == 'I' || s[i] == 'M')) ++i;
    }
    return true;
  };
  while (true) {
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == ';')) ++i;
    if (i >= n) return "";
    if (!address()) return "an unterminated address";
    blank();
    if (i < n && s[i] == ',') {
      ++i;
      blank();
      if (i < n && (s[i] == '+' || s[i] == '~')) {
        ++i;
        while (i < n && absl::ascii_isdigit(s[i])) ++i;
      } else if (!address()) {
        return "an unterminated address";
      }
    }
    blank();
    while (i < n && (s[i] == '!' || s[i] == ' ' || s[i] == '\t')) ++i;
    if (i >= n) return "a missing command";
    const char c = s[i++];
    if (c == '{') continue;  // a block: a command may follow at once
    switch (c) {
      case '}': case '=': case 'd': case 'D': case 'F': case 'g': case 'G':
      case 'h': case 'H': case 'n': case 'N': case 'p': case 'P': case 'x': case 'z':
        break;
      case 'l': case 'L': case 'q': case 'Q':
        blank();
        while (i < n && absl::ascii_isdigit(s[i])) ++i;
        break;
      case '#': case 'r': case 'R': case 'w': case 'W':
        to_eol();
        break;
      case ':': case 'b': case 't': case 'T': case 'v':
        while (i < n && s[i] != '\n' && s[i] != ';') ++i;
        break;
      case 'a': case 'i': case 'c':
        // Text to the end of the line; a backslash continues it on the next.
        while (i < n && s[i] != '\n') i += s[i] == '\\' ? 2 : 1;
        break;
      case 'e': {
        blank();
        const size_t from = i;
        to_eol();
        std::string cmd(s.substr(from, i - from));
        if (cmd.empty()) return "its e command runs the pattern space as a command";
        runs->push_back(cmd);
        break;
      }
      case 's': case 'y': {
        if (i >= n || s[i] == '\n' || s[i] == '\\') return "a malformed s or y command";
        const char delim = s[i++];
        if (!delimited(delim) || !delimited(delim)) return "an unterminated s or y command";
        if (c == 'y') break;
        while (i < n) {
          const char f = s[i];
          if (f == 'e') return "its s///e flag runs the pattern space as a command";
          if (f == 'w') {
            to_eol();
            break;
          }
          if (f == 'g' || f == 'p' || f == 'i' || f == 'I' || f == 'm' || f == 'M' ||
              absl::ascii_isdigit(f)) {
            ++i;
            continue;
          }
          break;
        }
        break;
      }
      default:
        return absl::StrCat("sed command '", std::string(1, c), "' is not understood");
    }
    blank();
    if (i < n && !(s[i] == ';' || s[i] == '\n' || s[i] == '}' || s[i] == '#')) {
      return "extra characters after a command";
    }
  }
}

Unwrapped UnwrapSed(const Argv& a) {
  static const Grammar g{"bsnrzuEe:f:l:i::",
                         {{"binary", Arity::kNone, "-b"},
                          {"debug", Arity::kNone, "--debug"},
                          {"expression", Arity::kRequired, "-e"},
                          {"file", Arity::kRequired, "-f"},
                          {"follow-symlinks", Arity::kNone, "--follow-symlinks"},
                          {"in-place", Arity::kOptional, "-i"},
                          {"line-length", Arity::kRequired, "-l"},
                          {"null-data", Arity::kNone, "-z"},
                          {"zero-terminated", Arity::kNone, "-z"},
                          {"quiet", Arity::kNone, "-n"},
                          {"silent", Arity::kNone, "-n"},
                          {"posix", Arity::kNone, "--posix"},
                          {"regexp-extended", Arity::kNone, "-E"},
                          {"sandbox", Arity::kNone, "--sandbox"},
                          {"separate", Arity::kNone, "-s"},
                          {"unbuffered", Arity::kNone, "-u"},
                          {"help", Arity::kNone, "--help"},
                          {"version", Arity::kNone, "--version"}}};
  Unwrapped u;
  u.runner = true;
  u.tail = Tail::kDenied;
  u.own.assign(a.begin() + 1, a.end());
  // GNU sed permutes: options may follow operands (until "--").
  std::vector<Option> opts;
  Argv operands;
  OptionReader r(&a, 1, g);
  Option o;
  while (true) {
    OptionReader::Result res = r.Next(&o, &u.error);
    if (res == OptionReader::kError) return u;
    if (res == OptionReader::kOption) {
      opts.push_back(o);
      continue;
    }
    size_t k = r.index();
    if (r.ended_by_dashdash() || k >= a.size()) {
      for (; k < a.size(); ++k) operands.push_back(a[k]);
      break;
    }
    operands.push_back(a[k]);
    r.Restart(&a, k + 1);
  }
  bool sandboxed = false, from_file = false;
  std::string script;
  bool has_e = false;
  for (const Option& x : opts) {
    if (x.key == "--sandbox") sandboxed = true;
    if (x.key == "-f") from_file = true;
    if (x.key == "-e") {
      absl::StrAppend(&script, has_e ? "\n" : "", x.value);
      has_e = true;
    }
  }
  if (sandboxed) return u;  // sed itself then refuses e, r and w
  if (from_file) {
    u.error = "a script file (-f) is not visible to the rules (use --sandbox)";
    return u;
  }
  if (!has_e) {
    if (operands.empty()) return u;  // sed fails without a script
    script = operands[0];
  }
  u.reparsed.push_back(script);
  Argv runs;
  std::string why = ScanSedScript(script, &runs);
  if (!why.empty()) {
    u.error = absl::StrCat("the script is denied: ", why);
    return u;
  }
  for (auto& cmd : runs) u.inner.push_back(ShellCommand(cmd));
  return u;
}

// --- awk (mawk, gawk, original-awk): system() and pipes run commands ----------------------

// Scans an awk program. Returns "" (with the string literals given to system() in
// *runs) or why not. A '/' starts a regular expression only where no operand precedes
// it, so that a division is never skipped as one.
std::string ScanAwkProgram(absl::string_view p, Argv* runs) {
  size_t i = 0;
  const size_t n = p.size();
  bool regex_ok = true;
  auto skip_blank = [&] {
    while (i < n && (p[i] == ' ' || p[i] == '\t')) ++i;
  };
  // A string literal at i (p[i] == '"'); `*plain` false when it holds an escape.
  auto literal = [&](std::string* text, bool* plain) -> bool {
    *plain = true;
    for (++i; i < n && p[i] != '"'; ++i) {
      if (p[i] == '\n') return false;
      if (p[i] == '\\') {
        *plain = false;
        ++i;
      }
      if (i < n) text->push_back(p[i]);
    }
    if (i >= n) return false;
    ++i;
    return true;
  };
  while (i < n) {
    const char c = p[i];
    if (c == ' ' || c == '\t' || c == '\r') {
      ++i;
    } else if (c == '\n') {
      regex_ok = true;
      ++i;
    } else if (c == '#') {
      while (i < n && p[i] != '\n') ++i;
    } else if (c == '\\' && i + 1 < n && p[i + 1] == '\n') {
      i += 2;
    } else if (c == '"') {
      std::string text;
      bool plain;
      if (!literal(&text, &plain)) return "an unterminated string";
      regex_ok = false;
    } else if (c == '/' && regex_ok) {
      // Awks disagree on a '/' inside a bracket expression (gawk keeps it in the
      // regular expression, others may end it there): such a program is denied.
      bool bracket = false;
      for (++i; i < n && (bracket || p[i] != '/'); ++i) {
        if (p[i] == '\n') return "an unterminated regular expression";
        if (bracket && p[i] == '/') return "a '/' inside a bracket expression";
        if (p[i] == '\\') {
          ++i;
        } else if (!bracket && p[i] == '[') {
          bracket = true;
          if (i + 1 < n && p[i + 1] == '^') ++i;
          if (i + 1 < n && p[i + 1] == ']') ++i;  // a leading ']' is a member
        } else if (bracket && p[i] == ']') {
          bracket = false;
        }
      }
      if (i >= n) return "an unterminated regular expression";
      ++i;
      regex_ok = false;
    } else if (absl::ascii_isalpha(c) || c == '_') {
      const size_t from = i;
      while (i < n && (absl::ascii_isalnum(p[i]) || p[i] == '_')) ++i;
      const absl::string_view word = p.substr(from, i - from);
      if (word == "system") {
        skip_blank();
        std::string text;
        bool plain = false;
        if (i < n && p[i] == '(') {
          ++i;
          skip_blank();
          if (i < n && p[i] == '"' && literal(&text, &plain) && plain) {
            skip_blank();
            if (i < n && p[i] == ')') {
              ++i;
              runs->push_back(text);
              regex_ok = false;
              continue;
            }
          }
        }
        return "system() is given something other than one plain string literal";
      }
      static const std::set<absl::string_view> kBeforeOperand = {
          "print", "printf", "return", "case", "do", "else", "in"};
      regex_ok = kBeforeOperand.count(word) > 0;
    } else if (absl::ascii_isdigit(c) || c == '.') {
      while (i < n && (absl::ascii_isalnum(p[i]) || p[i] == '.')) ++i;
      regex_ok = false;
    } else if (c == '|') {
      if (i + 1 < n && p[i + 1] == '|') {
        i += 2;
        regex_ok = true;
        continue;
      }
      return "a pipe to or from a command";
    } else if (c == '@') {
      return "'@' (gawk's @load, @include, indirect calls)";
    } else if ((c == '+' || c == '-') && i + 1 < n && p[i + 1] == c) {
      i += 2;
      regex_ok = false;
    } else if (c == ')' || c == ']' || c == '$') {
      ++i;
      regex_ok = false;
    } else {
      ++i;
      regex_ok = true;  // an operator or punctuation: an operand comes next
    }
  }
  return "";
}

Unwrapped UnwrapAwk(const Argv& a) {
  Unwrapped u;
  u.runner = true;
  u.tail = Tail::kDenied;
  u.own.assign(a.begin() + 1, a.end());
  size_t i = 1;
  for (; i < a.size() && IsFlag(a[i]); ++i) {
    const std::string& w = a[i];
    if (w == "--") {
      ++i;
      break;
    }
    if (absl::StartsWith(w, "-F") || absl::StartsWith(w, "-v")) {
      if (w.size() == 2) ++i;
      continue;
    }
    u.error = absl::StrCat("awk option '", Short(w),
                           "' is not modelled (program files, sources and extensions are "
                           "not visible to the rules)");
    return u;
  }
  if (i >= a.size()) return u;  // awk fails without a program
  u.reparsed.push_back(a[i]);
  Argv runs;
  std::string why = ScanAwkProgram(a[i], &runs);
  if (!why.empty()) {
    u.error = absl::StrCat("the program is denied: ", why);
    return u;
  }
  for (auto& cmd : runs) u.inner.push_back(ShellCommand(cmd));
  return u;
}

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
