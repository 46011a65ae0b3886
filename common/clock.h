// Time sources. Durations are int64 microseconds unless a name says otherwise.
//
// Code that waits or measures takes a Clock& so that tests can drive time through the
// real interface (FakeClock) instead of sleeping. Thread-safety: SystemClock is
// stateless; FakeClock is thread-safe.
#ifndef GANTRY_COMMON_CLOCK_H_
#define GANTRY_COMMON_CLOCK_H_

#include <atomic>
#include <cstdint>

namespace gantry {

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic: never goes backwards; unrelated to the calendar. For durations and
  // deadlines within one process.
  virtual int64_t MonotonicMicros() const = 0;
  // Wall clock, Unix epoch. For timestamps that leave the process (ledger, wire).
  virtual int64_t UnixMicros() const = 0;
};

// The process's real clocks (CLOCK_MONOTONIC, CLOCK_REALTIME). Never null.
const Clock& SystemClock();

// Test-only: time moves only when Advance() is called.
class FakeClock : public Clock {
 public:
  explicit FakeClock(int64_t unix_micros = 1'700'000'000'000'000)
      : mono_(0), unix_(unix_micros) {}
  int64_t MonotonicMicros() const override { return mono_.load(); }
  int64_t UnixMicros() const override { return unix_.load(); }
  void Advance(int64_t micros) {
    mono_ += micros;
    unix_ += micros;
  }

 private:
  std::atomic<int64_t> mono_;
  std::atomic<int64_t> unix_;
};

// A point on the monotonic clock after which work should stop.
class Deadline {
 public:
  // Expires `timeout_micros` from now on `clock`.
  Deadline(const Clock& clock, int64_t timeout_micros)
      : clock_(&clock), at_(clock.MonotonicMicros() + timeout_micros) {}
  bool Expired() const { return clock_->MonotonicMicros() >= at_; }
  // Never negative.
  int64_t RemainingMicros() const {
    int64_t left = at_ - clock_->MonotonicMicros();
    return left > 0 ? left : 0;
  }

 private:
  const Clock* clock_;
  int64_t at_;
};

}  // namespace gantry

#endif  // GANTRY_COMMON_CLOCK_H_
