#include "sandbox-svc/read_scope.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "policy/path_glob.h"

namespace gantry::sandbox {
namespace {

// The glob's characters before its first wildcard.
std::string LiteralPrefix(const std::string& glob) {
  return glob.substr(0, glob.find_first_of("*?"));
}

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

// Whether `glob` is PREFIX/** with no wildcard in PREFIX ("" for "/**"); sets *prefix.
bool LiteralTree(const std::string& glob, std::string* prefix) {
  if (glob.size() < 3 || glob.compare(glob.size() - 3, 3, "/**") != 0) return false;
  *prefix = glob.substr(0, glob.size() - 3);
  return prefix->find_first_of("*?") == std::string::npos;
}

bool IsTreeGlobOver(const std::string& glob, const std::string& dir) {
  std::string prefix;
  if (!LiteralTree(glob, &prefix)) return false;
  return dir == prefix || StartsWith(dir, prefix + "/");
}

std::string Join(const std::string& root, const std::string& rel) {
  return rel.empty() ? root : root + "/" + rel;
}

bool GlobWithin(const std::string& glob, const std::string& outer) {
  if (glob == outer) return true;
  if (glob.find_first_of("*?") == std::string::npos) return policy::GlobMatch(outer, glob);
  std::string prefix;
  return LiteralTree(outer, &prefix) && StartsWith(LiteralPrefix(glob), prefix + "/");
}

}  // namespace

int OpenBeneath(int root_fd, const std::string& rel, uint64_t flags) {
  if (rel.empty()) return openat(root_fd, ".", static_cast<int>(flags) | O_CLOEXEC);
  open_how how;
  memset(&how, 0, sizeof(how));
  how.flags = flags | O_CLOEXEC | O_NOFOLLOW;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(syscall(SYS_openat2, root_fd, rel.c_str(), &how, sizeof(how)));
}

bool ScopeMatches(const ReadScope& scope, const std::string& path) {
  for (const auto& any_of : scope.all_of) {
    bool any = false;
    for (const auto& glob : any_of) any = any || policy::GlobMatch(glob, path);
    if (!any) return false;
  }
  return true;
}

bool ScopeCoversTree(const ReadScope& scope, const std::string& dir) {
  for (const auto& any_of : scope.all_of) {
    bool any = false;
    for (const auto& glob : any_of) any = any || IsTreeGlobOver(glob, dir);
    if (!any) return false;
  }
  return true;
}

bool ScopeMayMatchBeneath(const ReadScope& scope, const std::string& dir) {
  const std::string beneath = dir + "/";
  for (const auto& any_of : scope.all_of) {
    bool any = false;
    for (const auto& glob : any_of) {
      const std::string literal = LiteralPrefix(glob);
      any = any || StartsWith(literal, beneath) || StartsWith(beneath, literal);
    }
    if (!any) return false;
  }
  return true;
}

bool ScopeWithin(const ReadScope& inner, const ReadScope& outer) {
  for (const auto& outer_list : outer.all_of) {
    bool contained = false;
    for (const auto& inner_list : inner.all_of) {
      bool all = !inner_list.empty();
      for (const auto& glob : inner_list) {
        bool any = false;
        for (const auto& o : outer_list) any = any || GlobWithin(glob, o);
        all = all && any;
      }
      contained = contained || all;
    }
    if (!contained) return false;
  }
  return true;
}

ReadPlan PlanReads(const std::string& root, const ReadScope& scope,
                   const ReadPlanLimits& limits) {
  ReadPlan plan;
  if (scope.unconstrained() || ScopeCoversTree(scope, root)) {
    plan.grants.push_back({"", ReadGrant::kTree});
    return plan;
  }
  const int root_fd = open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root_fd < 0) {
    plan.error = "cannot open " + root + ": " + strerror(errno);
    return plan;
  }
  auto grant = [&](std::string rel, ReadGrant::Kind kind) {
    if (plan.grants.size() >= limits.max_grants) {
      plan.error = "the operand globs match more than " + std::to_string(limits.max_grants) +
                   " workspace entries; grant a directory as DIR/** instead";
      return false;
    }
    plan.grants.push_back({std::move(rel), kind});
    return true;
  };
  if (ScopeMatches(scope, root) && !grant("", ReadGrant::kList)) return plan;
  size_t seen = 0;
  std::vector<std::string> pending = {""};  // directories to read, relative to root
  while (!pending.empty() && plan.error.empty()) {
    const std::string dir = std::move(pending.back());
    pending.pop_back();
    const int fd = OpenBeneath(root_fd, dir, O_RDONLY | O_DIRECTORY);
    DIR* d = fd >= 0 ? fdopendir(fd) : nullptr;
    if (d == nullptr) {
      // Gone or replaced (by a link) since its entry was read: nothing of it is granted.
      if (fd >= 0) close(fd);
      continue;
    }
    while (dirent* e = readdir(d)) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
      if (++seen > limits.max_entries) {
        plan.error = "the workspace has more than " + std::to_string(limits.max_entries) +
                     " entries where the operand globs could match; grant a directory as "
                     "DIR/** instead";
        break;
      }
      unsigned char type = e->d_type;
      if (type == DT_UNKNOWN) {
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_LNK;
      }
      std::string rel = dir.empty() ? e->d_name : dir + "/" + e->d_name;
      const std::string path = Join(root, rel);
      if (type == DT_DIR) {
        if (ScopeCoversTree(scope, path)) {
          if (!grant(std::move(rel), ReadGrant::kTree)) break;
          continue;
        }
        if (ScopeMatches(scope, path) && !grant(rel, ReadGrant::kList)) break;
        if (ScopeMayMatchBeneath(scope, path)) pending.push_back(std::move(rel));
      } else if (type == DT_REG) {
        if (ScopeMatches(scope, path) && !grant(std::move(rel), ReadGrant::kFile)) break;
      }
      // Links, devices, fifos and sockets get no rule.
    }
    closedir(d);
  }
  close(root_fd);
  if (!plan.error.empty()) plan.grants.clear();
  return plan;
}

}  // namespace gantry::sandbox
