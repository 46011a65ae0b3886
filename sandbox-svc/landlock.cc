#include "sandbox-svc/landlock.h"

#include <errno.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>

namespace gantry::sandbox {
namespace {

// The kernel's struct landlock_ruleset_attr as of ABI 6 (earlier ABIs read a prefix).
struct RulesetAttr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};

// struct landlock_path_beneath_attr (packed in the kernel's header).
struct __attribute__((packed)) PathBeneathAttr {
  uint64_t allowed_access;
  int32_t parent_fd;
};

constexpr unsigned kCreateRulesetVersion = 1u << 0;
constexpr int kRulePathBeneath = 1;

std::string Why(const char* what) { return std::string(what) + ": " + strerror(errno); }

}  // namespace

int LandlockAbi() {
  long abi = syscall(SYS_landlock_create_ruleset, nullptr, 0, kCreateRulesetVersion);
  return abi > 0 ? static_cast<int>(abi) : 0;
}

uint64_t RightsOfAbi(int abi, uint64_t rights) {
  uint64_t known = 0;
  if (abi >= 1) known = (1ull << 13) - 1;
  if (abi >= 2) known |= landlock::kRefer;
  if (abi >= 3) known |= landlock::kTruncate;
  if (abi >= 5) known |= landlock::kIoctlDev;
  return rights & known;
}

LandlockRuleset::~LandlockRuleset() {
  if (fd_ >= 0) close(fd_);
}

bool LandlockRuleset::Create(std::string* error) {
  abi_ = LandlockAbi();
  if (abi_ < 1) {
    *error = "the kernel has no Landlock (not built in, or not enabled at boot)";
    return false;
  }
  RulesetAttr attr;
  memset(&attr, 0, sizeof(attr));
  attr.handled_access_fs = RightsOfAbi(abi_, landlock::kAll);
  size_t size = offsetof(RulesetAttr, handled_access_net);
  if (abi_ >= 6) {
    attr.scoped = landlock::kScopeAbstractUnixSocket | landlock::kScopeSignal;
    size = sizeof(attr);
  }
  fd_ = static_cast<int>(syscall(SYS_landlock_create_ruleset, &attr, size, 0));
  if (fd_ < 0) {
    *error = Why("landlock_create_ruleset");
    return false;
  }
  return true;
}

bool LandlockRuleset::Allow(int fd, uint64_t rights, std::string* error) {
  struct stat st;
  if (fstat(fd, &st) != 0) {
    *error = Why("fstat");
    return false;
  }
  if (!S_ISDIR(st.st_mode)) rights &= landlock::kFileRights;
  PathBeneathAttr attr;
  attr.allowed_access = RightsOfAbi(abi_, rights);
  attr.parent_fd = fd;
  if (attr.allowed_access == 0) return true;
  if (syscall(SYS_landlock_add_rule, fd_, kRulePathBeneath, &attr, 0) != 0) {
    *error = Why("landlock_add_rule");
    return false;
  }
  return true;
}

bool LandlockRuleset::RestrictSelf(std::string* error) {
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    *error = Why("no_new_privs");
    return false;
  }
  if (syscall(SYS_landlock_restrict_self, fd_, 0) != 0) {
    *error = Why("landlock_restrict_self");
    return false;
  }
  return true;
}

}  // namespace gantry::sandbox
