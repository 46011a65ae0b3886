// Landlock (Linux 5.13+), the unprivileged access-control LSM: a process restricts
// itself and every process it starts to a ruleset of file hierarchies and the accesses
// allowed beneath each; the restriction can only be narrowed, never lifted. The
// sandbox's init applies one per call (sandbox_init_main.cc); docs/sandbox.md.
//
// Raw system calls: Debian 12's kernel headers know ABI 1-3; the rights and scopes of
// later ABIs are defined here and asked for only when LandlockAbi() reports them.
//
// Thread-safety: LandlockAbi is thread-safe; a LandlockRuleset is used by one thread.
#ifndef GANTRY_SANDBOX_SVC_LANDLOCK_H_
#define GANTRY_SANDBOX_SVC_LANDLOCK_H_

#include <cstdint>
#include <string>

namespace gantry::sandbox {

// The file-system rights (LANDLOCK_ACCESS_FS_*), by the ABI that added them.
namespace landlock {
inline constexpr uint64_t kExecute = 1ull << 0;
inline constexpr uint64_t kWriteFile = 1ull << 1;
inline constexpr uint64_t kReadFile = 1ull << 2;
inline constexpr uint64_t kReadDir = 1ull << 3;
inline constexpr uint64_t kRemoveDir = 1ull << 4;
inline constexpr uint64_t kRemoveFile = 1ull << 5;
inline constexpr uint64_t kMakeChar = 1ull << 6;
inline constexpr uint64_t kMakeDir = 1ull << 7;
inline constexpr uint64_t kMakeReg = 1ull << 8;
inline constexpr uint64_t kMakeSock = 1ull << 9;
inline constexpr uint64_t kMakeFifo = 1ull << 10;
inline constexpr uint64_t kMakeBlock = 1ull << 11;
inline constexpr uint64_t kMakeSym = 1ull << 12;
inline constexpr uint64_t kRefer = 1ull << 13;     // ABI 2
inline constexpr uint64_t kTruncate = 1ull << 14;  // ABI 3
inline constexpr uint64_t kIoctlDev = 1ull << 15;  // ABI 5
// Scopes (ABI 6): signals and abstract Unix sockets stay inside the domain.
inline constexpr uint64_t kScopeAbstractUnixSocket = 1ull << 0;
inline constexpr uint64_t kScopeSignal = 1ull << 1;

inline constexpr uint64_t kRead = kReadFile | kReadDir;
// What a file (not a directory) can be granted.
inline constexpr uint64_t kFileRights = kExecute | kWriteFile | kReadFile | kTruncate | kIoctlDev;
// Every right, of every ABI.
inline constexpr uint64_t kAll = (1ull << 16) - 1;
}  // namespace landlock

// The Landlock ABI version the running kernel offers; 0 when Landlock is not built in
// or disabled at boot.
int LandlockAbi();

// The rights the given ABI knows, of `rights`.
uint64_t RightsOfAbi(int abi, uint64_t rights);

class LandlockRuleset {
 public:
  LandlockRuleset() = default;
  ~LandlockRuleset();
  LandlockRuleset(const LandlockRuleset&) = delete;
  LandlockRuleset& operator=(const LandlockRuleset&) = delete;

  // Creates a ruleset handling every file-system right the kernel knows (so that what
  // no rule allows is denied), and the scopes when the kernel has them. False with
  // *error on failure (or ABI 0).
  bool Create(std::string* error);
  // Allows `rights` (narrowed to the kernel's ABI; for a non-directory, to
  // kFileRights) beneath the file or directory open at `fd` (O_PATH is enough).
  bool Allow(int fd, uint64_t rights, std::string* error);
  // Restricts the calling thread, and what it execs, to the ruleset. Needs
  // no_new_privs (set by bwrap and by the exec supervisor's filter).
  bool RestrictSelf(std::string* error);

  int abi() const { return abi_; }

 private:
  int fd_ = -1;
  int abi_ = 0;
};

}  // namespace gantry::sandbox

#endif  // GANTRY_SANDBOX_SVC_LANDLOCK_H_
