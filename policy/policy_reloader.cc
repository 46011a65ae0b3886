#include "policy/policy_reloader.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "policy/policy_loader.h"

namespace gantry::policy {
namespace {

// The pipe a SIGHUP writes to; -1 when no reloader is hooked. A plain int read in the
// handler keeps the handler async-signal-safe and independent of object lifetimes.
std::atomic<int> g_sighup_fd{-1};

void OnSighup(int) {
  int saved_errno = errno;
  int fd = g_sighup_fd.load();
  if (fd >= 0) {
    char c = 'r';
    (void)!write(fd, &c, 1);
  }
  errno = saved_errno;
}

std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// One read of the policy file: its bytes and what stat said of it before and after.
struct FileRead {
  std::string text;
  struct stat before {};
  struct stat after {};
};

bool SameStat(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino && a.st_size == b.st_size &&
         a.st_mtim.tv_sec == b.st_mtim.tv_sec && a.st_mtim.tv_nsec == b.st_mtim.tv_nsec &&
         a.st_ctim.tv_sec == b.st_ctim.tv_sec && a.st_ctim.tv_nsec == b.st_ctim.tv_nsec;
}

// Reads the whole file (at most kMaxPolicyBytes). Errors as LoadPolicyFile's.
absl::StatusOr<FileRead> ReadOnce(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    int err = errno;
    std::string why = absl::StrCat(path, ": ", std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(why);
    if (err == EACCES) return absl::PermissionDeniedError(why);
    return absl::DataLossError(why);
  }
  FileRead read_result;
  absl::Status status;
  if (fstat(fd, &read_result.before) != 0) {
    status = absl::DataLossError(absl::StrCat(path, ": fstat: ", std::strerror(errno)));
  } else if (!S_ISREG(read_result.before.st_mode)) {
    status = absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  char buffer[65536];
  while (status.ok()) {
    ssize_t got = read(fd, buffer, sizeof(buffer));
    if (got < 0) {
      if (errno == EINTR) continue;
      status = absl::DataLossError(absl::StrCat(path, ": read error"));
      break;
    }
    if (got == 0) break;
    read_result.text.append(buffer, static_cast<size_t>(got));
    if (read_result.text.size() > kMaxPolicyBytes) {
      status = absl::InvalidArgumentError(
          absl::StrCat(path, ": the file is larger than ", kMaxPolicyBytes, " bytes"));
    }
  }
  if (status.ok() && fstat(fd, &read_result.after) != 0) {
    status = absl::DataLossError(absl::StrCat(path, ": fstat: ", std::strerror(errno)));
  }
  close(fd);
  if (!status.ok()) return status;
  return read_result;
}

// The file's text once it has stayed the same for `options.stable_ms`: two reads that
// long apart with the same bytes, and the same inode, size, mtime and ctime before and
// after each. Errors: those of ReadOnce; UNAVAILABLE policy_file_unstable.
absl::StatusOr<std::string> ReadSettled(const std::string& path, const ReloaderOptions& options) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options.max_settle_ms);
  auto first = ReadOnce(path);
  if (!first.ok()) return first.status();
  while (true) {
    std::this_thread::sleep_for(std::chrono::milliseconds(options.stable_ms));
    auto second = ReadOnce(path);
    if (!second.ok()) return second.status();
    const bool settled = SameStat(first->before, first->after) &&
                         SameStat(second->before, second->after) &&
                         SameStat(first->after, second->before) && first->text == second->text;
    if (settled) return std::move(second->text);
    if (std::chrono::steady_clock::now() >= deadline) {
      return absl::UnavailableError(absl::StrCat(
          "policy_file_unstable: ", path, " kept changing for ", options.max_settle_ms,
          " ms; a policy is installed only once it has stayed the same for ",
          options.stable_ms, " ms"));
    }
    first = std::move(second);
  }
}

absl::StatusOr<std::shared_ptr<const Snapshot>> LoadSettled(const std::string& path,
                                                            const ReloaderOptions& options) {
  auto text = ReadSettled(path, options);
  if (!text.ok()) return text.status();
  return LoadPolicyText(*text, BaseName(path));
}

}  // namespace

absl::StatusOr<std::unique_ptr<PolicyReloader>> PolicyReloader::Create(std::string path,
                                                                       ReloaderOptions options) {
  options.stable_ms = std::max<int64_t>(0, options.stable_ms);
  options.max_settle_ms = std::max<int64_t>(0, options.max_settle_ms);
  auto first = LoadSettled(path, options);
  if (!first.ok()) return first.status();
  Log(LogLevel::kInfo, "policy.loaded", {{"path", path}, {"policy_sha256", (*first)->sha256}});
  return std::unique_ptr<PolicyReloader>(
      new PolicyReloader(std::move(path), options, *std::move(first)));
}

PolicyReloader::PolicyReloader(std::string path, ReloaderOptions options,
                               std::shared_ptr<const Snapshot> first)
    : path_(std::move(path)), options_(options), current_(std::move(first)) {}

PolicyReloader::~PolicyReloader() {
  int fd = pipe_write_.load();
  if (fd >= 0) {
    int expected = fd;
    g_sighup_fd.compare_exchange_strong(expected, -1);
  }
  if (watcher_.joinable()) {
    char c = 's';
    (void)!write(fd, &c, 1);
    watcher_.join();
  }
  if (inotify_fd_ >= 0) close(inotify_fd_);
  if (pipe_read_ >= 0) close(pipe_read_);
  if (fd >= 0) close(fd);
}

std::shared_ptr<const Snapshot> PolicyReloader::Current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

std::string PolicyReloader::last_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_error_;
}

absl::Status PolicyReloader::ReloadNow() {
  std::lock_guard<std::mutex> reload_lock(reload_mu_);
  auto next = LoadSettled(path_, options_);
  absl::Status result = next.status();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (next.ok()) {
      last_error_.clear();
      if ((*next)->sha256 != current_->sha256) {
        std::string old_hash = current_->sha256;
        current_ = *std::move(next);
        ++reloads_;
        Log(LogLevel::kInfo, "policy.reloaded",
            {{"path", path_}, {"policy_sha256", current_->sha256}, {"previous_sha256", old_hash}});
      }
    } else {
      last_error_ = std::string(result.message());
      ++errors_;
      Log(LogLevel::kError, "policy.reload_failed",
          {{"path", path_}, {"error", last_error_}, {"policy_sha256", current_->sha256}});
    }
  }
  {
    // Counted under mu_ so that a waiter cannot miss the notification.
    std::lock_guard<std::mutex> lock(mu_);
    ++attempts_;
  }
  attempts_cv_.notify_all();
  return result;
}

void PolicyReloader::RequestReloadFromSignal() {
  int fd = pipe_write_.load();
  if (fd < 0) return;
  char c = 'r';
  (void)!write(fd, &c, 1);
}

absl::Status PolicyReloader::InstallSighupHandler() {
  int fd = pipe_write_.load();
  if (fd < 0) return absl::FailedPreconditionError("call StartWatching() first");
  g_sighup_fd.store(fd);
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = &OnSighup;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  if (sigaction(SIGHUP, &action, nullptr) != 0) {
    return absl::InternalError(absl::StrCat("sigaction(SIGHUP): ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status PolicyReloader::StartWatching() {
  if (watcher_.joinable()) return absl::FailedPreconditionError("already watching");
  inotify_fd_ = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (inotify_fd_ < 0) {
    return absl::InternalError(absl::StrCat("inotify_init1: ", std::strerror(errno)));
  }
  std::string dir = DirName(path_);
  if (inotify_add_watch(inotify_fd_, dir.c_str(), IN_CLOSE_WRITE | IN_MOVED_TO) < 0) {
    return absl::InternalError(absl::StrCat("inotify_add_watch(", dir, "): ", std::strerror(errno)));
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    return absl::InternalError(absl::StrCat("pipe2: ", std::strerror(errno)));
  }
  pipe_read_ = fds[0];
  pipe_write_.store(fds[1]);
  watcher_ = std::thread([this] { WatchLoop(); });
  return absl::OkStatus();
}

void PolicyReloader::WatchLoop() {
  pthread_setname_np(pthread_self(), "policy-watch");  // shown by top -H and perf
  const std::string base = BaseName(path_);
  alignas(struct inotify_event) char buffer[8192];
  while (true) {
    struct pollfd fds[2] = {{inotify_fd_, POLLIN, 0}, {pipe_read_, POLLIN, 0}};
    int n = poll(fds, 2, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      Log(LogLevel::kError, "policy.watch_failed", {{"error", std::strerror(errno)}});
      return;
    }
    bool reload = false;
    if (fds[1].revents & POLLIN) {
      char cmds[64];
      ssize_t got = read(pipe_read_, cmds, sizeof(cmds));
      for (ssize_t i = 0; i < got; ++i) {
        if (cmds[i] == 's') return;
        if (cmds[i] == 'r') reload = true;
      }
    }
    if (fds[0].revents & POLLIN) {
      ssize_t got;
      while ((got = read(inotify_fd_, buffer, sizeof(buffer))) > 0) {
        for (ssize_t off = 0; off < got;) {
          const auto* event = reinterpret_cast<const struct inotify_event*>(buffer + off);
          if (event->len > 0 && base == event->name) reload = true;
          if (event->mask & IN_Q_OVERFLOW) reload = true;  // events lost: look anyway
          off += sizeof(struct inotify_event) + event->len;
        }
      }
    }
    if (reload) (void)ReloadNow();
  }
}

bool PolicyReloader::WaitForAttemptsForTest(uint64_t n, int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return attempts_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                               [&] { return attempts_.load() >= n; });
}

}  // namespace gantry::policy
