// Acceptance evaluators: judge a task's final answer against its manifest's checks
// (docs/tasks.md, "acceptance").
//
//   answer_contains: TEXT        the answer contains TEXT (byte-exact, case-sensitive)
//   exactly_n_bullets: N         exactly N lines are list items ("- ", "* ", "+ ", "• ",
//                                "1. ", "1) " after optional indentation)
//   cited_files_were_read: true  every file the answer cites was read by a read_file
//                                call of this task that ran and exited 0
//
// A citation is a path-like word of the answer (CitedFiles): components of
// [A-Za-z0-9_.-] joined by "/", the last with an extension that contains a letter,
// optionally followed by ":LINE" or ":LINE-LINE"; "./" and "/" prefixes are dropped.
//
// Thread-safety: pure functions.
#ifndef GANTRY_HARNESS_SVC_ACCEPTANCE_H_
#define GANTRY_HARNESS_SVC_ACCEPTANCE_H_

#include <set>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "harness-svc/manifest.h"

namespace gantry::harness {

struct CheckResult {
  std::string check;   // "answer_contains", ...
  bool passed = false;
  std::string detail;  // what was found, in words
};

// The paths the answer cites, normalised, in order of first appearance, unique.
std::vector<std::string> CitedFiles(absl::string_view answer);

// The number of list-item lines.
int CountBullets(absl::string_view answer);

// Evaluates each check in order. `files_read`: normalised paths read in this task.
std::vector<CheckResult> EvaluateAcceptance(const std::vector<AcceptanceCheck>& checks,
                                            absl::string_view answer,
                                            const std::set<std::string>& files_read);

}  // namespace gantry::harness

#endif  // GANTRY_HARNESS_SVC_ACCEPTANCE_H_
