#include "router/budget/budget_tracker.h"

#include <ctime>

#include "absl/strings/str_cat.h"
#include "common/error_codes.h"
#include "common/status.h"

namespace gantry::router {
namespace {

constexpr int64_t kMinuteUs = 60'000'000;
constexpr int64_t kDayUs = 86'400'000'000;

// Microseconds from `unix_us` to the start of the next UTC month.
int64_t UntilNextMonth(int64_t unix_us) {
  time_t secs = static_cast<time_t>(unix_us / 1'000'000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  tm.tm_mday = 1;
  tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
  tm.tm_mon += 1;
  const int64_t next = static_cast<int64_t>(timegm(&tm)) * 1'000'000;
  return next - unix_us;
}

// Retry-After of a rate limit of 0 (concurrent_requests or requests_per_minute): it
// never frees under this policy, only a reload can change it; a minute keeps clients
// from asking every second. (Token budgets of 0 say the next UTC day / month, when a
// budget would reset.)
constexpr uint32_t kNeverFreesRetryMs = 60'000;

// Whether `used` + `more` passes `limit`: never for an unlimited limit, always for a
// limit of 0 (even a request that reserves nothing), else when the sum is over it.
bool Passes(int64_t used, int64_t more, int64_t limit) {
  if (policy::IsUnlimited(limit)) return false;
  return limit == 0 || used + more > limit;
}

std::string NoneAllowed(const std::string& principal, const char* what, const char* key) {
  return absl::StrCat("the policy allows ", principal, " no ", what, " (", key, ": 0)");
}

uint32_t ToRetryMs(int64_t us) {
  const int64_t ms = (us + 999) / 1000;
  return static_cast<uint32_t>(std::min<int64_t>(std::max<int64_t>(ms, 1), 0xFFFFFFFF));
}

}  // namespace

void BudgetTracker::CalendarOf(int64_t unix_us, int64_t* day, int64_t* month) {
  *day = unix_us / kDayUs;
  time_t secs = static_cast<time_t>(unix_us / 1'000'000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  *month = static_cast<int64_t>(tm.tm_year) * 12 + tm.tm_mon;
}

void BudgetTracker::Roll(State* s, int64_t day, int64_t month) const {
  if (s->day != day) {
    s->day = day;
    s->day_tokens = 0;
  }
  if (s->month != month) {
    s->month = month;
    s->month_tokens = 0;
  }
}

absl::StatusOr<BudgetReservation> BudgetTracker::Begin(const std::string& principal,
                                                       const policy::Budgets& b) {
  const int64_t mono_us = clock_.MonotonicMicros();
  int64_t day, month;
  CalendarOf(clock_.UnixMicros(), &day, &month);
  std::lock_guard<std::mutex> lock(mu_);
  State& s = states_[principal];
  Roll(&s, day, month);
  // The other routers' counts (all zero with one router).
  Shared peer;
  if (auto it = peers_.find(principal); it != peers_.end()) peer = it->second;
  const int64_t in_flight = s.in_flight + peer.in_flight;
  if (Passes(in_flight, 1, b.concurrent_requests)) {
    return WithRetryAfter(
        ReasonError("rate_limited",
                    b.concurrent_requests == 0
                        ? NoneAllowed(principal, "concurrent requests", "concurrent_requests")
                        : absl::StrCat(principal, " has ", in_flight,
                                       " requests in flight; the limit is ",
                                       b.concurrent_requests)),
        b.concurrent_requests == 0 ? kNeverFreesRetryMs : 1000);
  }
  while (!s.admitted_us.empty() && mono_us - s.admitted_us.front() >= kMinuteUs) {
    s.admitted_us.pop_front();
  }
  if (Passes(static_cast<int64_t>(s.admitted_us.size()) + peer.minute_admissions, 1,
             b.requests_per_minute)) {
    // The oldest local admission says when a slot frees; the other routers' times are
    // not known here: a second.
    return WithRetryAfter(
        ReasonError("rate_limited",
                    b.requests_per_minute == 0
                        ? NoneAllowed(principal, "requests per minute", "requests_per_minute")
                        : absl::StrCat(principal, " reached ", b.requests_per_minute,
                                       " requests per minute")),
        b.requests_per_minute == 0 ? kNeverFreesRetryMs
        : s.admitted_us.empty()    ? 1000
                                   : ToRetryMs(kMinuteUs - (mono_us - s.admitted_us.front())));
  }
  s.in_flight += 1;
  s.admitted_us.push_back(mono_us);
  BudgetReservation r;
  r.principal = principal;
  r.day = day;
  r.month = month;
  return r;
}

absl::Status BudgetTracker::Reserve(const policy::Budgets& b, int64_t reserve_tokens,
                                    BudgetReservation* r) {
  const int64_t now_us = clock_.UnixMicros();
  int64_t day, month;
  CalendarOf(now_us, &day, &month);
  const std::string& principal = r->principal;
  std::lock_guard<std::mutex> lock(mu_);
  State& s = states_[principal];
  Roll(&s, day, month);
  // The tokens count against the day they are reserved in (Settle() keys on it).
  r->day = day;
  r->month = month;
  Shared peer;
  if (auto it = peers_.find(principal); it != peers_.end()) peer = it->second;
  const int64_t day_tokens = s.day_tokens + (peer.day == day ? peer.day_tokens : 0);
  const int64_t month_tokens = s.month_tokens + (peer.month == month ? peer.month_tokens : 0);
  if (Passes(day_tokens, reserve_tokens, b.tokens_per_day)) {
    return WithRetryAfter(
        ReasonError("budget_exhausted",
                    b.tokens_per_day == 0
                        ? NoneAllowed(principal, "tokens per day", "tokens_per_day")
                        : absl::StrCat(principal, " has used ", day_tokens, " of ",
                                       b.tokens_per_day, " tokens today; this request reserves ",
                                       reserve_tokens)),
        ToRetryMs(kDayUs - now_us % kDayUs));
  }
  if (Passes(month_tokens, reserve_tokens, b.tokens_per_month)) {
    return WithRetryAfter(
        ReasonError("budget_exhausted",
                    b.tokens_per_month == 0
                        ? NoneAllowed(principal, "tokens per month", "tokens_per_month")
                        : absl::StrCat(principal, " has used ", month_tokens, " of ",
                                       b.tokens_per_month,
                                       " tokens this month; this request reserves ",
                                       reserve_tokens)),
        ToRetryMs(UntilNextMonth(now_us)));
  }
  // Only a day budget that is a number above 0 has a half and four fifths (unlimited is
  // a marker, not a number to take a share of; 0 admitted nothing). The threshold is
  // rounded up, so that a tiny budget (1 token) still warns when it is crossed.
  if (!policy::IsUnlimited(b.tokens_per_day) && b.tokens_per_day > 0) {
    for (int percent : {80, 50}) {
      const int64_t threshold = (b.tokens_per_day * percent + 99) / 100;
      if (day_tokens < threshold && day_tokens + reserve_tokens >= threshold) {
        r->warning_percent = percent;
        break;
      }
    }
  }
  s.day_tokens += reserve_tokens;
  s.month_tokens += reserve_tokens;
  r->tokens += reserve_tokens;
  return absl::OkStatus();
}

absl::StatusOr<BudgetReservation> BudgetTracker::Admit(const std::string& principal,
                                                       const policy::Budgets& budgets,
                                                       int64_t reserve_tokens) {
  GANTRY_ASSIGN_OR_RETURN(BudgetReservation r, Begin(principal, budgets));
  absl::Status reserved = Reserve(budgets, reserve_tokens, &r);
  if (!reserved.ok()) {
    Settle(r, 0);
    return reserved;
  }
  return r;
}

void BudgetTracker::Settle(const BudgetReservation& r, int64_t used_tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  State& s = states_[r.principal];
  s.in_flight = std::max<int64_t>(0, s.in_flight - 1);
  const int64_t delta = used_tokens - r.tokens;
  // A reservation made on an earlier day or month no longer counts against the new one.
  if (s.day == r.day) s.day_tokens = std::max<int64_t>(0, s.day_tokens + delta);
  if (s.month == r.month) s.month_tokens = std::max<int64_t>(0, s.month_tokens + delta);
}

std::map<std::string, BudgetTracker::Shared> BudgetTracker::LocalCounts() const {
  const int64_t mono_us = clock_.MonotonicMicros();
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, Shared> out;
  for (const auto& [principal, s] : states_) {
    Shared& c = out[principal];
    c.day = s.day;
    c.month = s.month;
    c.day_tokens = s.day_tokens;
    c.month_tokens = s.month_tokens;
    c.in_flight = s.in_flight;
    for (auto t = s.admitted_us.rbegin(); t != s.admitted_us.rend(); ++t) {
      if (mono_us - *t >= kMinuteUs) break;
      ++c.minute_admissions;
    }
  }
  return out;
}

void BudgetTracker::SetPeerCounts(std::map<std::string, Shared> peers) {
  std::lock_guard<std::mutex> lock(mu_);
  peers_ = std::move(peers);
}

BudgetTracker::Usage BudgetTracker::UsageOf(const std::string& principal) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = states_.find(principal);
  if (it == states_.end()) return {};
  return {it->second.day_tokens, it->second.month_tokens, it->second.in_flight};
}

}  // namespace gantry::router
