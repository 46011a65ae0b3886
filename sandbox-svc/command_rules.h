// Executable-aware command rules: which programs an `exec` tool call may run.
//
// This file is the sandbox's half: resolving and unwrapping. Which program may run
// with which words is decided by ONE engine, the access policy's (policy/policy_decide.h,
// grants[i].commands: subcommands, allowed and forbidden flags, operand globs,
// max_args); the sandbox asks it about each program of a command through
// CommandRuleSet, implemented by PolicyCommandRules (policy_command_rules.h). Anything
// the policy does not grant is denied (deny by default). Rules that code builds (tests,
// the benchmark, a task manifest's own executables) are a policy too
// (policy/command_policy.h), so there is no second rule format or matcher.
//
// Deciding a command: argv[0] is resolved to the real executable (see
// executable_resolver.h); a multi-call binary is decided as the name it runs under
// (git-<cmd> is `git <cmd>`, a busybox applet is busybox's rule with the applet as its
// first word), at every level of the chain. Known wrappers are unwrapped with the
// program's own option grammar and every program in the chain must be allowed on its
// own: env (getopt_long as GNU env reads it, -S split as env splits it and read again),
// nice, timeout, nohup, stdbuf, setsid, ionice, xargs (optional arguments only
// attached; unknown options deny), sh/bash/dash/ash/ksh/zsh -c (one simple command: no
// pipes, redirections, expansions or globs), find -exec/-execdir/-ok/-okdir ('+' ends
// the command only right after "{}"), git's global options (-C; --version/-v and
// --help/-h are the subcommands version and help, as git makes them; options that
// choose the repository, can run programs or print and exit are denied), and the
// commands that tar options, sed's
// e command and awk's system() run through /bin/sh -c. Words that xargs appends or
// substitutes may not reach a place where they choose a program. Flags are normalised
// before matching: "--name=value" is "--name", a unique prefix of a denied long flag
// counts as that flag (GNU getopt abbreviations), and a short cluster "-rf" counts as
// "-r" and "-f" as well as itself. Environment assignments that change how programs are
// found, loaded or configured (PATH, LD_*, HOME, GIT_* ...) are denied. docs/sandbox.md
// ("Command rules") lists exactly what is modelled and what is not.
//
// Each program is asked of the rule set with its own words (a wrapper's own options
// and assignments, not the program it wraps), its working directory and the sandbox's
// view, through which the policy's operand globs also see each operand's real path
// (ExecutableResolver::ResolveOperand).
//
// Thread-safety: DecideCommand is a pure function of its arguments (the resolver is
// only read).
#ifndef GANTRY_SANDBOX_SVC_COMMAND_RULES_H_
#define GANTRY_SANDBOX_SVC_COMMAND_RULES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sandbox-svc/executable_resolver.h"
#include "sandbox-svc/read_scope.h"

namespace gantry::sandbox {

// What a command is decided against, one program of the chain at a time (after
// resolution and unwrapping). Implementations are immutable; thread-safe.
class CommandRuleSet {
 public:
  virtual ~CommandRuleSet() = default;
  // Whether a rule names the resolved executable `exe` at all. When yes, `*rule_id` is
  // the id to quote when the program's own arguments cannot be understood (an unknown
  // wrapper option). When not, `*denial` is the whole reason ("rule:<id>: ...").
  virtual bool Names(const std::string& exe, std::string* rule_id,
                     std::string* denial) const = 0;
  // Checks one program: `global_flags` are options before a subcommand that the
  // unwrapping set apart (git -C DIR ...), `args` the rest after argv[0], `cwd` its
  // absolute working directory in the sandbox, `resolver` the sandbox's view (for
  // operands: ExecutableResolver::ResolveOperand). Returns "" with `*rule_id` set to
  // the allowing rule, or the whole denial reason ("rule:<id>: ...").
  virtual std::string Check(const std::string& exe, const std::vector<std::string>& global_flags,
                            const std::vector<std::string>& args, absl::string_view cwd,
                            const ExecutableResolver& resolver, std::string* rule_id) const = 0;
  // Appends to `scope` what bounds the workspace reads of the resolved executable `exe`
  // (read_scope.h): per grant that names it, the operand globs of all its rules as one
  // list (any of its rules may allow an argv); a grant with a rule that has no operand
  // globs bounds nothing, and adds no list.
  virtual void AppendReadScope(const std::string& exe, ReadScope* scope) const = 0;
};

struct CommandDecision {
  bool allowed = false;
  // Id of the rule that allowed the innermost program, or of the rule that denied: a
  // policy rule id ("grants[2].commands[0]", "default_deny"), or "default-deny" for
  // what the unwrapping itself refuses (nesting, a program name from input, ...).
  std::string rule_id;
  // With a denial: "rule:<id>: <why>".
  std::string reason;
  // The argv to run: the input with argv[0] replaced by its resolved path (for a
  // multi-call name, the command it names: ./git-log -> [/usr/bin/git, log, ...]).
  std::vector<std::string> argv;
  // The program that finally runs after unwrapping (the innermost resolved path).
  std::string resolved_executable;
  // Every program decided, outermost first.
  std::vector<std::string> chain;
};

// Decides `argv` (run with working directory `cwd`, absolute inside the sandbox).
// Never fails: a command that cannot be understood is denied with a reason.
CommandDecision DecideCommand(const CommandRuleSet& rules, const std::vector<std::string>& argv,
                              absl::string_view cwd, const ExecutableResolver& resolver);

// Splits the text of `sh -c TEXT` into words when it is one simple command: words
// separated by blanks, with '...' and "..." quoting and backslash escapes. Errors:
// PERMISSION_DENIED naming the first construct that is not plain: | & ; < > ( ) $ ` * ?
// [ ] { } ~ # !, a newline, an assignment, an unterminated quote.
absl::StatusOr<std::vector<std::string>> SplitSimpleCommand(absl::string_view text);

// Splits the text of `env -S TEXT` as GNU env does (coreutils' build_argv): blanks
// separate words outside quotes; '...' keeps everything but \\ and \'; "..." and bare
// text know \" \' \\ \# \$ \_ (a separator outside "...", a space inside), \c (ends the
// text), \f \n \r \t \v; '#' at a word's start ends the text. Errors (PERMISSION_DENIED):
// what env itself refuses (another backslash sequence, \c inside "...", a trailing
// backslash, an unterminated quote) and any ${NAME}, whose value the rules cannot know.
// A text of only white space gives no words (env then ignores it).
absl::StatusOr<std::vector<std::string>> SplitEnvSplitString(absl::string_view text);

// Whether setting environment variable `name` is denied (changes lookup or loading).
bool IsDeniedEnvName(absl::string_view name);

}  // namespace gantry::sandbox

#endif  // GANTRY_SANDBOX_SVC_COMMAND_RULES_H_
