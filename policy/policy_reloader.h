// Hot reload of the access policy: keeps the current Snapshot and replaces it when the
// file changes (inotify) or when the process is asked to (SIGHUP).
//
// A reload reads the file, validates it and runs its inline examples (LoadPolicyText);
// only a snapshot that passed all of that is swapped in, atomically. An invalid, half
// written or missing file leaves the old policy in force: the error is logged
// ("policy.reload_failed"), counted (reload_errors()) and kept (last_error()) for the
// CLI and metrics. Callers take Current() once per request and keep that
// shared_ptr<const Snapshot> to the end, so requests in flight finish under the policy
// they started with.
//
// Watching: the file's directory is watched for IN_CLOSE_WRITE and IN_MOVED_TO on the
// file's name, which covers editors that write in place and tools that write a
// temporary file and rename it over the policy (the atomic way). A writer that is still
// writing has not closed the file yet, so nothing is read early; one that closes a
// partial file gets a failed reload and the old policy stays.
//
// Only a file written whole is installed: a writer may close the file between pieces
// (a shell appending line by line, a tool writing in chunks), and a prefix of a policy
// can parse as a valid policy with fewer grants or bounds. So a reload reads the file,
// waits `stable_ms`, and reads it again: only when both reads hold the same bytes (same
// SHA-256) and the file's identity, size, mtime and ctime did not change in between is
// the text loaded; otherwise it looks again, up to `max_settle_ms`, and then fails with
// "policy_file_unstable" (the old policy stays; the writer's final close brings another
// reload). A writer that pauses longer than `stable_ms` between pieces is not detected:
// write a temporary file and rename it over the policy (docs/policy.md).
//
// Thread-safety: every method is thread-safe. RequestReloadFromSignal() is also
// async-signal-safe.
#ifndef GANTRY_POLICY_POLICY_RELOADER_H_
#define GANTRY_POLICY_POLICY_RELOADER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "policy/policy_types.h"

namespace gantry::policy {

struct ReloaderOptions {
  // How long the file must stay the same (bytes and metadata) before it is installed.
  int64_t stable_ms = 250;
  // How long one reload waits for the file to settle before it fails.
  int64_t max_settle_ms = 5000;
};

class PolicyReloader {
 public:
  // Loads `path` once (the first load also waits for the file to be stable). Errors:
  // those of LoadPolicyFile (a service must not start without a valid policy);
  // UNAVAILABLE policy_file_unstable when the file kept changing.
  static absl::StatusOr<std::unique_ptr<PolicyReloader>> Create(std::string path,
                                                                ReloaderOptions options = {});

  // Stops the watcher thread, if any, and detaches the SIGHUP hook if it points here.
  ~PolicyReloader();
  PolicyReloader(const PolicyReloader&) = delete;
  PolicyReloader& operator=(const PolicyReloader&) = delete;

  // The policy in force. Never null.
  std::shared_ptr<const Snapshot> Current() const;

  // Starts the watcher thread (inotify on the file's directory, plus the reload
  // requests of RequestReloadFromSignal). Errors: INTERNAL when inotify or the thread
  // cannot be set up; FAILED_PRECONDITION when already started.
  absl::Status StartWatching();

  // Reloads now on the calling thread. OK after a swap or when the file is unchanged;
  // otherwise the load error (and the old policy stays).
  absl::Status ReloadNow();

  // Asks the watcher thread to reload. Async-signal-safe (one write(2) to a pipe); a
  // no-op before StartWatching().
  void RequestReloadFromSignal();

  // Makes SIGHUP call RequestReloadFromSignal() on this reloader (sigaction with
  // SA_RESTART). For a service whose main has no signal handling of its own; one that
  // has calls RequestReloadFromSignal() from its handler instead.
  absl::Status InstallSighupHandler();

  uint64_t reload_attempts() const { return attempts_.load(); }
  uint64_t reloads() const { return reloads_.load(); }
  uint64_t reload_errors() const { return errors_.load(); }
  // The message of the latest failed reload; "" when the latest attempt succeeded.
  std::string last_error() const;

  // Test-only: waits until reload_attempts() >= n or `timeout_ms` passes; returns
  // whether it got there.
  bool WaitForAttemptsForTest(uint64_t n, int64_t timeout_ms);

 private:
  PolicyReloader(std::string path, ReloaderOptions options,
                 std::shared_ptr<const Snapshot> first);
  void WatchLoop();

  const std::string path_;
  const ReloaderOptions options_;
  mutable std::mutex mu_;  // guards current_ and last_error_
  std::shared_ptr<const Snapshot> current_;
  std::string last_error_;
  std::mutex reload_mu_;  // serialises reloads
  std::condition_variable attempts_cv_;
  std::atomic<uint64_t> attempts_{0};
  std::atomic<uint64_t> reloads_{0};
  std::atomic<uint64_t> errors_{0};
  int inotify_fd_ = -1;
  int pipe_read_ = -1;
  std::atomic<int> pipe_write_{-1};
  std::thread watcher_;
};

}  // namespace gantry::policy

#endif  // GANTRY_POLICY_POLICY_RELOADER_H_
