// Budgets and rates per principal, enforced by reservation before dispatch.
//
// A request is admitted in two steps, so that the rates are charged before the costly
// part of admission (rendering and counting the prompt):
//   Begin()    concurrent requests (in flight < concurrent_requests), then requests per
//              minute (a sliding 60-second window). Takes a slot in flight and a place
//              in the window; the place stays taken even when the request is refused
//              later (a prompt that is too long was still rendered).
//   Reserve()  the token budgets of the current UTC day and month, reserving
//              `reserve_tokens` (prompt + the whole output cap) against both, so that
//              the total can never pass a budget however long the answer runs.
// Admit() is the two in one. Settle() replaces the reservation with the tokens actually
// used and frees the slot; it ends every Begin(), reserved or not (used 0).
// A refusal is RESOURCE_EXHAUSTED with reason rate_limited (concurrency, rate) or
// budget_exhausted (tokens), each with a Retry-After: until a window slot frees, or until
// the next UTC day / month.
//
// Each limit is enforced exactly as policy::Budgets carries it: N admits up to N, 0
// refuses every request in that dimension (a limit of 0 never frees, so its Retry-After
// is 60 seconds for concurrent_requests / requests_per_minute, and the next UTC day /
// month for tokens_per_day / tokens_per_month), and policy::kUnlimited never refuses in
// that dimension (its counts are still kept and shared). The 50 / 80 percent warnings
// exist only for a day budget that is a number above 0.
//
// Several routers: each keeps its own counts here and adds the other routers' counts,
// which router/budget/budget_sync.h exchanges through Postgres every half second
// (SetPeerCounts), to its own in every check. Between two exchanges the routers
// together may overshoot a limit by what the others admitted in that interval.
//
// Thread-safety: thread-safe.
#ifndef GANTRY_ROUTER_BUDGET_BUDGET_TRACKER_H_
#define GANTRY_ROUTER_BUDGET_BUDGET_TRACKER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "policy/policy_types.h"

namespace gantry::router {

struct BudgetReservation {
  std::string principal;
  int64_t tokens = 0;  // reserved
  int64_t day = 0;     // the UTC day / month the reservation counts against
  int64_t month = 0;
  // Share of the day's token budget in use after this reservation crossed 50 or 80
  // percent for the first time (0 when no threshold was crossed).
  int warning_percent = 0;
};

class BudgetTracker {
 public:
  explicit BudgetTracker(const Clock& clock = SystemClock()) : clock_(clock) {}

  absl::StatusOr<BudgetReservation> Begin(const std::string& principal,
                                          const policy::Budgets& budgets);
  // On an error no tokens are reserved (the reservation still holds its slot).
  absl::Status Reserve(const policy::Budgets& budgets, int64_t reserve_tokens,
                       BudgetReservation* reservation);
  absl::StatusOr<BudgetReservation> Admit(const std::string& principal,
                                          const policy::Budgets& budgets, int64_t reserve_tokens);
  // `used_tokens` may exceed the reservation only through a bug elsewhere; it is counted.
  void Settle(const BudgetReservation& reservation, int64_t used_tokens);

  struct Usage {
    int64_t day_tokens = 0;
    int64_t month_tokens = 0;
    int64_t in_flight = 0;
  };
  Usage UsageOf(const std::string& principal) const;

  // One principal's counts as routers share them (router/budget/budget_sync.h).
  struct Shared {
    int64_t day = 0, month = 0;  // the UTC day / month the token counts belong to
    int64_t day_tokens = 0, month_tokens = 0;  // settled + reserved
    int64_t in_flight = 0;
    int64_t minute_admissions = 0;  // admissions in the last 60 seconds
  };
  // This router's own counts, for every principal it has admitted.
  std::map<std::string, Shared> LocalCounts() const;
  // The other routers' counts, summed per principal; replaces the previous set. Admit()
  // adds them to this router's own (token counts only when their day / month is the
  // current one).
  void SetPeerCounts(std::map<std::string, Shared> peers);

  // The UTC day number and month number (year * 12 + month) of a Unix time, and of now
  // by this tracker's clock.
  static void CalendarOf(int64_t unix_us, int64_t* day, int64_t* month);
  void Today(int64_t* day, int64_t* month) const { CalendarOf(clock_.UnixMicros(), day, month); }

 private:
  struct State {
    int64_t day = -1, month = -1;
    int64_t day_tokens = 0, month_tokens = 0;  // settled + reserved
    int64_t in_flight = 0;
    std::deque<int64_t> admitted_us;  // admissions in the last minute (monotonic)
  };
  void Roll(State* s, int64_t day, int64_t month) const;

  const Clock& clock_;
  mutable std::mutex mu_;
  std::map<std::string, State> states_;
  std::map<std::string, Shared> peers_;
};

}  // namespace gantry::router

#endif  // GANTRY_ROUTER_BUDGET_BUDGET_TRACKER_H_
