// Budgets and rates shared by several routers through Postgres.
//
// Each router process has an id (random per start) and one row per principal in table
// gantry_budget_usage: its own counts (BudgetTracker::LocalCounts: the day's and the
// month's tokens, settled plus reserved, with the day and month they belong to; the
// requests in flight; the admissions of the last minute) and the database's time of the
// last write. Every `interval_ms` a background thread writes this router's rows and
// reads the other routers' rows back, summed per principal, into the tracker
// (BudgetTracker::SetPeerCounts), which adds them to its own in every check:
//
//   - token counts of every router count, live or not, as long as their day / month is
//     the current one: a budget survives a router's restart or crash, and rows of
//     earlier months are deleted;
//   - requests in flight and admissions of the last minute count only from rows
//     written in the last `live_after_ms` (by the database's clock): a router that
//     stopped no longer holds slots.
//
// The exchange is eventually consistent: between two exchanges each router enforces
// its own counts plus the others' as last read, so the routers together may overshoot
// a limit by what the others admitted since (at most one interval's worth). While
// Postgres cannot be reached the thread retries every interval; token counts keep their
// last value and in-flight / per-minute counts of the others are dropped once older
// than `live_after_ms`, so each router then enforces at least its own counts.
//
// Thread-safety: thread-safe; one background thread per BudgetSync.
#ifndef GANTRY_ROUTER_BUDGET_BUDGET_SYNC_H_
#define GANTRY_ROUTER_BUDGET_BUDGET_SYNC_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "router/budget/budget_tracker.h"

namespace gantry::router {

struct BudgetSyncOptions {
  std::string database_url;  // libpq URL or key=value string (the ledger's database)
  std::string router_id;     // "" (default): a new random id ("router_...")
  int interval_ms = 500;     // 0: no background thread (SyncOnce() only; tests)
  int live_after_ms = 5000;  // in-flight / per-minute counts older than this are dropped
};

class BudgetSync {
 public:
  // Starts the background exchange for `tracker` (not owned; must outlive this object).
  // Connecting is retried in the background, so an unreachable database is not an error
  // here. Errors: INVALID_ARGUMENT for an empty database URL or a negative interval.
  static absl::StatusOr<std::unique_ptr<BudgetSync>> Start(BudgetTracker* tracker,
                                                           BudgetSyncOptions options);
  // Stops the thread and deletes this router's rows of in-flight and per-minute counts
  // (its token counts stay, so the budget keeps them).
  ~BudgetSync();
  BudgetSync(const BudgetSync&) = delete;
  BudgetSync& operator=(const BudgetSync&) = delete;

  // One exchange now: write this router's counts, read the others'. Creates the table
  // when missing. Errors: UNAVAILABLE when the database cannot be reached or refuses.
  absl::Status SyncOnce();

  const std::string& router_id() const { return options_.router_id; }
  int64_t exchanges() const { return exchanges_.load(); }
  int64_t failures() const { return failures_.load(); }

  struct Impl;

 private:
  BudgetSync(BudgetTracker* tracker, BudgetSyncOptions options);
  void Run();

  BudgetTracker* const tracker_;
  BudgetSyncOptions options_;
  std::unique_ptr<Impl> impl_;  // the connection; used under sync_mu_
  std::mutex sync_mu_;          // one exchange at a time
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::atomic<int64_t> exchanges_{0};
  std::atomic<int64_t> failures_{0};
  int64_t last_ok_ms_ = 0;  // monotonic ms of the last successful exchange (sync_mu_)
  std::thread thread_;
};

}  // namespace gantry::router

#endif  // GANTRY_ROUTER_BUDGET_BUDGET_SYNC_H_
