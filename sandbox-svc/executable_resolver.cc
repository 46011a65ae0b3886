#include "sandbox-svc/executable_resolver.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "sandbox-svc/isolation.h"

namespace gantry::sandbox {
namespace {

absl::Status NotFound(absl::string_view what) {
  return Error(absl::StatusCode::kNotFound, "executable_not_found",
               absl::StrCat(what.substr(0, 300), ": not found in the sandbox"));
}

absl::string_view BaseName(absl::string_view path) {
  size_t slash = path.rfind('/');
  return slash == absl::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::string ExecutableResolver::MultiCallKind(absl::string_view resolved) const {
  absl::string_view base = BaseName(resolved);
  if (base == "git" || base == "busybox") return std::string(base);
  return "";
}

std::string SandboxViewResolver::MultiCallKind(absl::string_view resolved) const {
  std::string by_name = ExecutableResolver::MultiCallKind(resolved);
  if (!by_name.empty()) return by_name;
  auto host_of = [&](const std::string& real) {
    return absl::StartsWith(real, "/workspace/")
               ? absl::StrCat(host_workspace_, real.substr(strlen("/workspace")))
               : real;
  };
  struct stat st;
  if (stat(host_of(std::string(resolved)).c_str(), &st) != 0) return "";
  static constexpr std::pair<const char*, const char*> kKnown[] = {
      {"/usr/bin/git", "git"},           {"/usr/lib/git-core/git", "git"},
      {"/usr/bin/busybox", "busybox"},   {"/bin/busybox", "busybox"},
      {"/usr/sbin/busybox", "busybox"},
  };
  for (const auto& [path, kind] : kKnown) {
    auto real = RealPath(path);
    struct stat known;
    if (real.ok() && stat(host_of(*real).c_str(), &known) == 0 && known.st_dev == st.st_dev &&
        known.st_ino == st.st_ino) {
      return kind;
    }
  }
  return "";
}

absl::StatusOr<std::string> SandboxViewResolver::RealPath(absl::string_view sandbox_path) const {
  const SystemLayout& layout = HostSystemLayout();
  std::vector<std::string> pending = absl::StrSplit(sandbox_path, '/', absl::SkipEmpty());
  std::reverse(pending.begin(), pending.end());
  std::vector<std::string> done;
  int links = 0;
  while (!pending.empty()) {
    std::string part = pending.back();
    pending.pop_back();
    if (part == ".") continue;
    if (part == "..") {
      if (!done.empty()) done.pop_back();
      continue;
    }
    std::vector<std::string> next = done;
    next.push_back(part);
    const std::string sandbox = absl::StrCat("/", absl::StrJoin(next, "/"));
    // Map the sandbox path to the host, or learn that it is a top-level link.
    std::string host;
    std::string link_target;
    bool is_link = false;
    if (next.size() == 1) {
      for (const auto& [path, target] : layout.links) {
        if (path == sandbox) {
          is_link = true;
          link_target = target;
        }
      }
    }
    if (!is_link) {
      if (next[0] == "workspace" && !host_workspace_.empty()) {
        host = host_workspace_;
        for (size_t i = 1; i < next.size(); ++i) absl::StrAppend(&host, "/", next[i]);
      } else {
        bool visible = next[0] == "usr";
        for (const auto& d : layout.dirs) visible = visible || sandbox == d || absl::StartsWith(sandbox, d + "/");
        for (const auto& e : layout.etc) visible = visible || sandbox == e || absl::StartsWith(sandbox, e + "/");
        if (!visible && !(next.size() == 1 && next[0] == "etc")) return NotFound(sandbox_path);
        host = sandbox;
      }
      struct stat st;
      if (lstat(host.c_str(), &st) != 0) return NotFound(sandbox_path);
      if (S_ISLNK(st.st_mode)) {
        char buf[4096];
        ssize_t n = readlink(host.c_str(), buf, sizeof(buf) - 1);
        if (n <= 0) return NotFound(sandbox_path);
        is_link = true;
        link_target.assign(buf, static_cast<size_t>(n));
      }
    }
    if (!is_link) {
      done = std::move(next);
      continue;
    }
    if (++links > 40) return NotFound(sandbox_path);
    if (absl::StartsWith(link_target, "/")) done.clear();
    std::vector<std::string> parts = absl::StrSplit(link_target, '/', absl::SkipEmpty());
    for (auto it = parts.rbegin(); it != parts.rend(); ++it) pending.push_back(*it);
  }
  return absl::StrCat("/", absl::StrJoin(done, "/"));
}

absl::StatusOr<std::string> SandboxViewResolver::Resolve(absl::string_view name,
                                                         absl::string_view cwd) const {
  if (name.empty() || name.size() > 4096 || absl::StrContains(name, '\0')) return NotFound("''");
  auto usable = [&](const std::string& sandbox_path) -> absl::StatusOr<std::string> {
    GANTRY_ASSIGN_OR_RETURN(std::string real, RealPath(sandbox_path));
    std::string host = real;
    if (absl::StartsWith(real, "/workspace/")) {
      host = absl::StrCat(host_workspace_, real.substr(strlen("/workspace")));
    }
    struct stat st;
    if (stat(host.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || (st.st_mode & 0111) == 0) {
      return NotFound(sandbox_path);
    }
    return real;
  };
  if (absl::StrContains(name, '/')) {
    std::string path = absl::StartsWith(name, "/") ? std::string(name)
                                                   : absl::StrCat(cwd, "/", name);
    return usable(path);
  }
  for (absl::string_view dir : absl::StrSplit(kSandboxPath, ':')) {
    auto found = usable(absl::StrCat(dir, "/", name));
    if (found.ok()) return found;
  }
  return NotFound(name);
}

}  // namespace gantry::sandbox
