#include "router/budget/budget_sync.h"

#include <pthread.h>

#include <chrono>
#include <exception>
#include <map>
#include <utility>

#include <pqxx/pqxx>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/ids.h"
#include "common/log.h"

namespace gantry::router {
namespace {

constexpr char kCreateTable[] =
    "CREATE TABLE IF NOT EXISTS gantry_budget_usage ("
    " router_id text NOT NULL, principal text NOT NULL,"
    " day bigint NOT NULL, month bigint NOT NULL,"
    " day_tokens bigint NOT NULL, month_tokens bigint NOT NULL,"
    " in_flight bigint NOT NULL, minute_admissions bigint NOT NULL,"
    " updated_at timestamptz NOT NULL DEFAULT now(),"
    " PRIMARY KEY (router_id, principal))";

// Rows of months before the current one are deleted every this many exchanges.
constexpr int64_t kPruneEvery = 120;

int64_t MonotonicMs() { return SystemClock().MonotonicMicros() / 1000; }

}  // namespace

struct BudgetSync::Impl {
  std::unique_ptr<pqxx::connection> conn;
  bool table_ready = false;
  std::map<std::string, BudgetTracker::Shared> peers;  // the last read
};

absl::StatusOr<std::unique_ptr<BudgetSync>> BudgetSync::Start(BudgetTracker* tracker,
                                                              BudgetSyncOptions options) {
  if (options.database_url.empty()) {
    return absl::InvalidArgumentError("budget sync: a database URL is required");
  }
  if (options.interval_ms < 0 || options.live_after_ms <= 0) {
    return absl::InvalidArgumentError("budget sync: interval_ms >= 0, live_after_ms > 0");
  }
  if (options.router_id.empty()) options.router_id = NewId("router");
  std::unique_ptr<BudgetSync> sync(new BudgetSync(tracker, std::move(options)));
  if (sync->options_.interval_ms > 0) sync->thread_ = std::thread([s = sync.get()] { s->Run(); });
  return sync;
}

BudgetSync::BudgetSync(BudgetTracker* tracker, BudgetSyncOptions options)
    : tracker_(tracker), options_(std::move(options)), impl_(std::make_unique<Impl>()) {
  last_ok_ms_ = MonotonicMs();
}

BudgetSync::~BudgetSync() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // This router holds no slots any more; its token counts stay part of the budget.
  std::lock_guard<std::mutex> lock(sync_mu_);
  if (impl_->conn == nullptr || !impl_->table_ready) return;
  try {
    pqxx::work tx(*impl_->conn);
    tx.exec0(absl::StrCat(
        "UPDATE gantry_budget_usage SET in_flight = 0, minute_admissions = 0, "
        "updated_at = now() WHERE router_id = ", tx.quote(options_.router_id)));
    tx.commit();
  } catch (const std::exception&) {
    // Best effort: the rows stop counting after live_after_ms anyway.
  }
}

absl::Status BudgetSync::SyncOnce() {
  std::lock_guard<std::mutex> lock(sync_mu_);
  int64_t day, month;
  tracker_->Today(&day, &month);
  const std::map<std::string, BudgetTracker::Shared> local = tracker_->LocalCounts();
  try {
    if (impl_->conn == nullptr || !impl_->conn->is_open()) {
      impl_->conn = std::make_unique<pqxx::connection>(options_.database_url);
      impl_->table_ready = false;
    }
    pqxx::work tx(*impl_->conn);
    // The ledger's setup creates the table for the writer role, which may not create
    // tables (CREATE ... IF NOT EXISTS still needs that privilege).
    if (!impl_->table_ready &&
        tx.exec1("SELECT to_regclass('gantry_budget_usage') IS NULL")[0].as<bool>()) {
      tx.exec0(kCreateTable);
    }
    const std::string me = tx.quote(options_.router_id);
    if (!local.empty()) {
      std::string sql =
          "INSERT INTO gantry_budget_usage (router_id, principal, day, month, day_tokens, "
          "month_tokens, in_flight, minute_admissions) VALUES ";
      bool first = true;
      for (const auto& [principal, c] : local) {
        absl::StrAppend(&sql, first ? "" : ",", "(", me, ",", tx.quote(principal), ",", c.day,
                        ",", c.month, ",", c.day_tokens, ",", c.month_tokens, ",", c.in_flight,
                        ",", c.minute_admissions, ")");
        first = false;
      }
      sql +=
          " ON CONFLICT (router_id, principal) DO UPDATE SET day = EXCLUDED.day,"
          " month = EXCLUDED.month, day_tokens = EXCLUDED.day_tokens,"
          " month_tokens = EXCLUDED.month_tokens, in_flight = EXCLUDED.in_flight,"
          " minute_admissions = EXCLUDED.minute_admissions, updated_at = now()";
      tx.exec0(sql);
    }
    pqxx::result rows = tx.exec(absl::StrCat(
        "SELECT principal, day, month, day_tokens, month_tokens, in_flight, minute_admissions,"
        " updated_at > now() - interval '", options_.live_after_ms, " milliseconds'"
        " FROM gantry_budget_usage WHERE router_id <> ", me, " AND month >= ", month));
    if (exchanges_.load() % kPruneEvery == kPruneEvery - 1) {
      tx.exec0(absl::StrCat("DELETE FROM gantry_budget_usage WHERE month < ", month));
    }
    tx.commit();
    impl_->table_ready = true;
    std::map<std::string, BudgetTracker::Shared> peers;
    for (const auto& row : rows) {
      BudgetTracker::Shared& p = peers[row[0].as<std::string>()];
      p.day = day;
      p.month = month;
      if (row[1].as<int64_t>() == day) p.day_tokens += row[3].as<int64_t>();
      if (row[2].as<int64_t>() == month) p.month_tokens += row[4].as<int64_t>();
      if (row[7].as<bool>()) {
        p.in_flight += row[5].as<int64_t>();
        p.minute_admissions += row[6].as<int64_t>();
      }
    }
    impl_->peers = peers;
    tracker_->SetPeerCounts(std::move(peers));
    last_ok_ms_ = MonotonicMs();
    exchanges_.fetch_add(1);
    return absl::OkStatus();
  } catch (const std::exception& e) {
    failures_.fetch_add(1);
    impl_->conn.reset();  // reconnect next time
    // Without news, the others' slots and per-minute admissions lapse as the rows would.
    if (MonotonicMs() - last_ok_ms_ > options_.live_after_ms) {
      for (auto& [principal, p] : impl_->peers) p.in_flight = p.minute_admissions = 0;
      tracker_->SetPeerCounts(impl_->peers);
    }
    return absl::UnavailableError(absl::StrCat("budget sync: ", e.what()));
  }
}

void BudgetSync::Run() {
  pthread_setname_np(pthread_self(), "budget-sync");  // shown by top -H and perf
  bool failing = false;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    absl::Status s = SyncOnce();
    if (!s.ok() && !failing) {
      Log(LogLevel::kWarning, "budget.sync_failed", {{"error", s.ToString()}});
    } else if (s.ok() && failing) {
      Log(LogLevel::kInfo, "budget.sync_restored");
    }
    failing = !s.ok();
    lock.lock();
    cv_.wait_for(lock, std::chrono::milliseconds(options_.interval_ms), [this] { return stop_; });
  }
}

}  // namespace gantry::router
