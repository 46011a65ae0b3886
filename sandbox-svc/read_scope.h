// Which workspace files a call's programs may read, as the policy's operand globs say,
// turned into the Landlock rules that make the kernel enforce it (docs/sandbox.md,
// "Reads confined by Landlock").
//
// A command rule's operand globs check the words of a command line. A program then
// opens what it likes (sed '1r FILE', awk getline, dd if=FILE, python3 -c CODE), so the
// globs are also applied where the effect happens: the sandbox's init
// (sandbox_init_main.cc) walks /workspace before it runs the command, and gives the
// kernel a Landlock rule for exactly the entries the globs match. Every program of the
// call runs in that domain, so none of them can open a workspace file the globs do not
// match, whatever its own language lets it name.
//
// A ReadScope is an AND of OR-lists: each list is the operand globs of one grant that
// names one program of the command's chain (policy/policy_types.h, CommandRule); a
// path is readable when, in every list, some glob matches it. No lists: the whole
// workspace is readable (no program of the chain has operand globs).
//
// Thread-safety: pure functions; PlanReads reads the file system only.
#ifndef GANTRY_SANDBOX_SVC_READ_SCOPE_H_
#define GANTRY_SANDBOX_SVC_READ_SCOPE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gantry::sandbox {

struct ReadScope {
  std::vector<std::vector<std::string>> all_of;
  bool unconstrained() const { return all_of.empty(); }
};

// Whether, in every list, some glob matches `path` (policy::GlobMatch).
bool ScopeMatches(const ReadScope& scope, const std::string& path);

// Whether every path beneath directory `dir` is matched: in every list some glob is
// PREFIX/** with no wildcard in PREFIX, and `dir` is PREFIX or beneath it.
bool ScopeCoversTree(const ReadScope& scope, const std::string& dir);

// Whether some path beneath `dir` could be matched: in every list some glob's literal
// prefix (up to its first wildcard) is compatible with "dir/" (one is a prefix of the
// other). Conservative: false only when nothing beneath can match.
bool ScopeMayMatchBeneath(const ReadScope& scope, const std::string& dir);

// Whether every path `inner` allows is allowed by `outer` (a sufficient check on the
// globs, conservative: false when it cannot tell). Each list of `outer` must contain,
// glob by glob, some list of `inner`: a glob is within another when they are equal,
// when it names no wildcard and the other matches it, or when the other is PREFIX/**
// (no wildcard in PREFIX) and its own literal prefix lies beneath PREFIX.
bool ScopeWithin(const ReadScope& inner, const ReadScope& outer);

// One Landlock rule of the plan.
struct ReadGrant {
  enum Kind {
    kTree,  // a directory: every file beneath may be read, every directory listed
    kFile,  // a file that may be read
    kList,  // a directory that may be listed (Landlock: its subdirectories too)
  };
  std::string path;  // relative to the walked root; "" is the root itself
  Kind kind;
};

struct ReadPlanLimits {
  size_t max_entries = 200000;  // directory entries looked at
  size_t max_grants = 20000;    // rules
};

struct ReadPlan {
  std::vector<ReadGrant> grants;
  // Why the plan could not be made ("" when it was): the limits were passed, or a
  // directory could not be read. The call must then not run.
  std::string error;
};

// Walks `root` (an absolute directory, /workspace in the sandbox; globs are matched
// against root + "/" + the relative path) without following symbolic links (openat2
// RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, one directory at a time) and plans the rules for `scope`: a directory whose whole tree is
// covered is one kTree rule and is not entered; a matched directory is listable; a
// matched regular file is readable; a directory is entered only when something beneath
// it could match. Links get no rule (the kernel checks what a link leads to by that
// file's own place). With an unconstrained scope the plan is `root` as one kTree.
ReadPlan PlanReads(const std::string& root, const ReadScope& scope,
                   const ReadPlanLimits& limits = {});

// Opens `rel` beneath the directory open at `root_fd` without following any link
// (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS, O_NOFOLLOW,
// O_CLOEXEC added to `flags`); "" opens the directory itself. A descriptor, or -1 with errno.
int OpenBeneath(int root_fd, const std::string& rel, uint64_t flags);

}  // namespace gantry::sandbox

#endif  // GANTRY_SANDBOX_SVC_READ_SCOPE_H_
