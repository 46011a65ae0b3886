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

SandboxViewResolver::Walked SandboxViewResolver::Walk(absl::string_view sandbox_path,
                                                     std::string* real) const {
  const SystemLayout& layout = HostSystemLayout();
  // Components still to walk, the next last; from_link: it came from a link's target.
  struct Part {
    std::string name;
    bool from_link;
  };
  std::vector<Part> pending;
  for (absl::string_view p : absl::StrSplit(sandbox_path, '/', absl::SkipEmpty())) {
    pending.push_back({std::string(p), false});
  }
  std::reverse(pending.begin(), pending.end());
  std::vector<std::string> done;
  size_t missing = 0;      // how many of done's last components do not exist
  bool was_missing = false;
  int links = 0;
  while (!pending.empty()) {
    Part part = std::move(pending.back());
    pending.pop_back();
    if (part.name == ".") continue;
    if (part.name == "..") {
      if (!done.empty()) done.pop_back();
      if (missing > 0) --missing;
      continue;
    }
    if (missing > 0) {  // beneath a directory that does not exist: nothing to read
      done.push_back(std::move(part.name));
      ++missing;
      continue;
    }
    std::vector<std::string> next = done;
    next.push_back(part.name);
    const std::string sandbox = absl::StrCat("/", absl::StrJoin(next, "/"));
    // Map the sandbox path to the host, or learn that it is a top-level link.
    std::string link_target;
    bool is_link = false, exists = true;
    if (next.size() == 1) {
      for (const auto& [path, target] : layout.links) {
        if (path == sandbox) {
          is_link = true;
          link_target = target;
        }
      }
    }
    if (!is_link) {
      std::string host;
      if (next[0] == "workspace" && !host_workspace_.empty()) {
        host = host_workspace_;
        for (size_t i = 1; i < next.size(); ++i) absl::StrAppend(&host, "/", next[i]);
      } else {
        bool visible = next[0] == "usr" || (next.size() == 1 && next[0] == "etc");
        for (const auto& d : layout.dirs) visible = visible || sandbox == d || absl::StartsWith(sandbox, d + "/");
        for (const auto& e : layout.etc) visible = visible || sandbox == e || absl::StartsWith(sandbox, e + "/");
        if (!visible && (next[0] == "tmp" || next[0] == "dev" || next[0] == "proc" ||
                         next[0] == "workspace")) {
          *real = absl::StrCat("/", next[0]);  // the sandbox's own: not in this view
          return Walked::kUnseen;
        }
        exists = visible;  // the rest of the sandbox's root is read-only and empty
        host = sandbox;
      }
      struct stat st;
      if (exists && lstat(host.c_str(), &st) != 0) exists = false;
      if (exists && S_ISLNK(st.st_mode)) {
        char buf[4096];
        ssize_t n = readlink(host.c_str(), buf, sizeof(buf) - 1);
        if (n <= 0) {
          exists = false;
        } else {
          is_link = true;
          link_target.assign(buf, static_cast<size_t>(n));
        }
      }
    }
    if (!exists) {
      if (part.from_link) {
        *real = sandbox;
        return Walked::kDangling;
      }
      // Not there (yet): the rest is read lexically beneath the real directory.
      was_missing = true;
      missing = 1;
      done = std::move(next);
      continue;
    }
    if (!is_link) {
      done = std::move(next);
      continue;
    }
    if (++links > 40) return Walked::kTooManyLinks;
    if (absl::StartsWith(link_target, "/")) done.clear();
    std::vector<std::string> parts = absl::StrSplit(link_target, '/', absl::SkipEmpty());
    for (auto it = parts.rbegin(); it != parts.rend(); ++it) pending.push_back({*it, true});
  }
  *real = absl::StrCat("/", absl::StrJoin(done, "/"));
  return was_missing ? Walked::kMissing : Walked::kFound;
}

absl::StatusOr<std::string> SandboxViewResolver::RealPath(absl::string_view sandbox_path) const {
  std::string real;
  if (Walk(sandbox_path, &real) != Walked::kFound) return NotFound(sandbox_path);
  return real;
}

policy::OperandPath ExecutableResolver::ResolveOperand(absl::string_view,
                                                       absl::string_view) const {
  return {};
}

policy::OperandPath SandboxViewResolver::ResolveOperand(absl::string_view cwd,
                                                        absl::string_view operand) const {
  if (operand.empty() || operand.size() > 4096 || absl::StrContains(operand, '\0')) return {};
  const std::string path = absl::StartsWith(operand, "/") ? std::string(operand)
                                                          : absl::StrCat(cwd, "/", operand);
  policy::OperandPath out;
  std::string real;
  switch (Walk(path, &real)) {
    case Walked::kFound:
    case Walked::kMissing:
      out.real = std::move(real);
      break;
    case Walked::kDangling:
      out.denial = absl::StrCat("a symbolic link on its way leads to ", real,
                                ", which does not exist in the sandbox (a dangling link "
                                "is denied: what is made there later could lead anywhere)");
      break;
    case Walked::kUnseen:
      out.denial = absl::StrCat("it leads into the sandbox's own ", real,
                                ", whose links the rules cannot follow");
      break;
    case Walked::kTooManyLinks:
      out.denial = "it is reached through more than 40 symbolic links";
      break;
  }
  return out;
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
