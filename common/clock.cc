#include "common/clock.h"

#include <time.h>

namespace gantry {
namespace {

int64_t Read(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

class RealClock : public Clock {
 public:
  int64_t MonotonicMicros() const override { return Read(CLOCK_MONOTONIC); }
  int64_t UnixMicros() const override { return Read(CLOCK_REALTIME); }
};

}  // namespace

const Clock& SystemClock() {
  static const RealClock clock;
  return clock;
}

}  // namespace gantry
