#include "sandbox-svc/path_guard.h"

#include <fnmatch.h>
#include <algorithm>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status.h"

namespace gantry::sandbox {
namespace {

absl::Status Escapes(absl::string_view path) {
  return Error(absl::StatusCode::kPermissionDenied, "path_outside_workspace",
               absl::StrCat("path escapes the workspace: ", path.substr(0, 200)));
}

bool MatchParts(const std::vector<std::string>& pat, size_t pi,
                const std::vector<std::string>& parts, size_t si, int* budget) {
  if (--*budget <= 0) return false;
  if (pi == pat.size()) return si == parts.size();
  if (pat[pi] == "**") {
    for (size_t k = si; k <= parts.size(); ++k) {
      if (MatchParts(pat, pi + 1, parts, k, budget)) return true;
    }
    return false;
  }
  if (si == parts.size()) return false;
  if (fnmatch(pat[pi].c_str(), parts[si].c_str(), FNM_PERIOD) != 0) return false;
  return MatchParts(pat, pi + 1, parts, si + 1, budget);
}

}  // namespace

absl::StatusOr<std::vector<std::string>> SplitToolPath(absl::string_view path) {
  if (path.size() > 4096 || path.find('\0') != absl::string_view::npos) {
    return Error(absl::StatusCode::kInvalidArgument, "invalid_tool_call", "bad path");
  }
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    if (part == ".") continue;
    if (part == "..") {
      if (out.empty()) return Escapes(path);
      out.pop_back();
      continue;
    }
    out.emplace_back(part);
  }
  return out;
}

absl::StatusOr<std::string> ResolveInWorkspace(const std::string& workspace_root,
                                               absl::string_view path) {
  GANTRY_ASSIGN_OR_RETURN(std::vector<std::string> pending, SplitToolPath(path));
  std::reverse(pending.begin(), pending.end());  // a stack: back() is next
  std::vector<std::string> done;
  int links = 0;
  while (!pending.empty()) {
    std::string part = pending.back();
    pending.pop_back();
    if (part == ".") continue;
    if (part == "..") {
      if (done.empty()) return Escapes(path);
      done.pop_back();
      continue;
    }
    std::string host = absl::StrCat(workspace_root, "/", absl::StrJoin(done, "/"),
                                    done.empty() ? "" : "/", part);
    struct stat st;
    if (lstat(host.c_str(), &st) != 0) {
      // Missing: the rest is kept as written (it must not climb out either).
      done.push_back(part);
      while (!pending.empty()) {
        std::string rest = pending.back();
        pending.pop_back();
        if (rest == "..") {
          if (done.empty()) return Escapes(path);
          done.pop_back();
        } else if (rest != ".") {
          done.push_back(rest);
        }
      }
      break;
    }
    if (!S_ISLNK(st.st_mode)) {
      done.push_back(part);
      continue;
    }
    if (++links > 40) {
      return Error(absl::StatusCode::kFailedPrecondition, "invalid_tool_call",
                   "too many symbolic links");
    }
    char target[4096];
    ssize_t n = readlink(host.c_str(), target, sizeof(target) - 1);
    if (n <= 0) return Escapes(path);
    absl::string_view t(target, static_cast<size_t>(n));
    // An absolute target names a sandbox path; only /workspace/... stays inside.
    if (!t.empty() && t[0] == '/') {
      std::vector<std::string> parts = absl::StrSplit(t, '/', absl::SkipEmpty());
      if (parts.empty() || parts[0] != "workspace") return Escapes(path);
      done.clear();
      parts.erase(parts.begin());
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) pending.push_back(*it);
      continue;
    }
    std::vector<std::string> parts = absl::StrSplit(t, '/', absl::SkipEmpty());
    for (auto it = parts.rbegin(); it != parts.rend(); ++it) pending.push_back(*it);
  }
  return absl::StrJoin(done, "/");
}

bool GlobMatch(absl::string_view pattern, absl::string_view path) {
  std::vector<std::string> pat = absl::StrSplit(pattern, '/', absl::SkipEmpty());
  std::vector<std::string> parts = absl::StrSplit(path, '/', absl::SkipEmpty());
  if (pat.size() > 64 || parts.size() > 256) return false;
  int budget = 100000;
  return MatchParts(pat, 0, parts, 0, &budget);
}

bool MatchesAny(const std::vector<std::string>& globs, absl::string_view rel) {
  for (const auto& g : globs) {
    if (GlobMatch(g, rel)) return true;
  }
  return false;
}

}  // namespace gantry::sandbox
