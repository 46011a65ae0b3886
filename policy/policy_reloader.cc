#include "policy/policy_reloader.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

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

}  // namespace

absl::StatusOr<std::unique_ptr<PolicyReloader>> PolicyReloader::Create(std::string path) {
  auto first = LoadPolicyFile(path);
  if (!first.ok()) return first.status();
  Log(LogLevel::kInfo, "policy.loaded", {{"path", path}, {"policy_sha256", (*first)->sha256}});
  return std::unique_ptr<PolicyReloader>(new PolicyReloader(std::move(path), *std::move(first)));
}

PolicyReloader::PolicyReloader(std::string path, std::shared_ptr<const Snapshot> first)
    : path_(std::move(path)), current_(std::move(first)) {}

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
  auto next = LoadPolicyFile(path_);
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
