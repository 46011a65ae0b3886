#include "sandbox-svc/workspace_roots.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/error_codes.h"

namespace gantry::sandbox {
namespace {

bool Trusted(uid_t uid) { return uid == 0 || uid == geteuid(); }

// Whether no untrusted user can replace the entry `child` of the directory `parent`.
bool SafeStep(const struct stat& parent, const struct stat& child) {
  if (!Trusted(parent.st_uid)) return false;
  if ((parent.st_mode & (S_IWGRP | S_IWOTH)) == 0) return true;
  return (parent.st_mode & S_ISVTX) != 0 && Trusted(child.st_uid);
}

bool BeneathRoot(const std::string& real, const std::vector<std::string>& roots) {
  for (const auto& root : roots) {
    char resolved[PATH_MAX];
    if (root.empty() || realpath(root.c_str(), resolved) == nullptr) continue;
    const std::string r = resolved;
    if (r != "/" && real.size() > r.size() + 1 && real.compare(0, r.size(), r) == 0 &&
        real[r.size()] == '/') {
      return true;
    }
  }
  return false;
}

absl::Status Outside(const std::string& real, absl::string_view why) {
  return ReasonError("sandbox_workspace_outside_roots",
                     absl::StrCat("workspace ", real.substr(0, 512), ": ", why));
}

absl::Status Unsafe(const std::string& real, absl::string_view why) {
  return ReasonError("sandbox_workspace_unsafe",
                     absl::StrCat("workspace ", real.substr(0, 512), ": ", why));
}

}  // namespace

absl::Status CheckWorkspace(const std::string& real, const std::vector<std::string>& roots,
                            uid_t fallback_uid, gid_t fallback_gid) {
  struct stat ws;
  if (!roots.empty()) {
    if (!BeneathRoot(real, roots)) return Outside(real, "not beneath a workspace root");
    int dir = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    absl::Cleanup close_dir = [&dir] {
      if (dir >= 0) close(dir);
    };
    struct stat parent;
    if (dir < 0 || fstat(dir, &parent) != 0) return Outside(real, "cannot open /");
    std::string walked;
    for (absl::string_view part : absl::StrSplit(real, '/', absl::SkipEmpty())) {
      absl::StrAppend(&walked, "/", part);
      const std::string name(part);
      int next = openat(dir, name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (next < 0) return Outside(real, absl::StrCat(walked, " changed while it was checked"));
      close(dir);
      dir = next;
      struct stat child;
      if (fstat(dir, &child) != 0) return Outside(real, "cannot stat " + walked);
      if (!SafeStep(parent, child)) {
        return Unsafe(real, absl::StrCat("the directory that holds ", walked,
                                         " can be changed by a user other than root"));
      }
      parent = child;
    }
    // The directory now open is the one the path names: nothing was swapped on the way.
    char linked[PATH_MAX];
    const std::string self = absl::StrCat("/proc/self/fd/", dir);
    ssize_t n = readlink(self.c_str(), linked, sizeof linked - 1);
    if (n <= 0 || std::string(linked, static_cast<size_t>(n)) != real) {
      return Outside(real, "the opened directory is not at this path");
    }
    ws = parent;
  } else if (stat(real.c_str(), &ws) != 0) {
    return Outside(real, "cannot stat it");
  }
  if (geteuid() == 0) {
    if (ws.st_uid == 0 && (fallback_uid == 0 || fallback_gid == 0)) {
      return Unsafe(real, "root owns it and the fallback ids are root's");
    }
    if (ws.st_uid != 0 && ws.st_gid == 0) {
      return Unsafe(real, "its group is root's (gid 0): the call would run with gid 0");
    }
  }
  return absl::OkStatus();
}

}  // namespace gantry::sandbox
