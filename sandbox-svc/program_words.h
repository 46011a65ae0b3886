// How the programs the sandbox models split their words (command_rules.h's rules
// decide on what these give): getopt_long(3) grammars as the GNU programs read them,
// and for each modelled program (env, nice and the other simple wrappers, xargs, sh -c,
// find, git, tar, sed, awk, interpreters) its own words, the commands it runs and the
// texts it parses as commands. Internal to the sandbox's rule files:
// program_words.cc (words and grammars), program_unwrap.cc (wrappers and runners),
// program_scripts.cc (sed and awk scripts), command_rules.cc (the decision).
#ifndef GANTRY_SANDBOX_SVC_PROGRAM_WORDS_H_
#define GANTRY_SANDBOX_SVC_PROGRAM_WORDS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace gantry::sandbox::programs {

using Argv = std::vector<std::string>;

std::string Basename(absl::string_view path);
// At most 120 bytes of `s`, for messages.
std::string Short(absl::string_view s);
// NAME=VALUE with a shell variable name.
bool IsAssignment(absl::string_view word);
// A flag: starts with '-' and is not "-" alone.
inline bool IsFlag(absl::string_view a) { return a.size() > 1 && a[0] == '-'; }


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

  Result Next(Option* o, std::string* error);

 private:
  Result NextShort(Option* o, std::string* error);
  Result NextLong(Option* o, std::string* error);

  const Argv* a_;
  size_t i_;
  size_t pos_ = 0;  // > 0: inside a short-option cluster of word i_
  bool dashdash_ = false;
  const Grammar& g_;
};

// Reads all leading options of `a` from `from`; returns the index of the first operand
// or -1 with `*error`.
int ReadOptions(const Argv& a, size_t from, const Grammar& g, std::vector<Option>* out,
                std::string* error);

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

// a[from..] (empty past the end).
Argv WordsFrom(const Argv& a, size_t from);
// `sh -c TEXT` as a command a program runs.
Inner ShellCommand(std::string text);

// What `argv` (whose program's basename is `base`) splits into; a program the sandbox
// does not model is a leaf (all its words its own).
Unwrapped UnwrapProgram(const std::string& base, const Argv& argv);
// busybox applets whose behaviour is modelled.
bool IsKnownApplet(absl::string_view applet);
// sed and awk (program_scripts.cc): the commands their scripts run (sed's e, awk's
// system() and pipes), or why a script is not understood.
Unwrapped UnwrapSed(const Argv& a);
Unwrapped UnwrapAwk(const Argv& a);

}  // namespace gantry::sandbox::programs

#endif  // GANTRY_SANDBOX_SVC_PROGRAM_WORDS_H_
