// Which refusals become ledger events of their own (Gateway::RecordRefusal): one each up
// to `per_minute` of a principal in a minute, counted by reason past that. A minute
// starts at the principal's first refusal after the last one ended; when the next
// refusal comes after it, the minute's counts are handed out once (the gateway records
// them as one admission.refusals_counted event), and TakeAll hands out what is still
// counted at the end. So no key can grow the ledger faster than `per_minute` rows a
// minute by asking for what it may not have, and every refusal is still accounted for.
//
// Thread-safety: thread-safe.
#ifndef GANTRY_ROUTER_REFUSAL_SAMPLER_H_
#define GANTRY_ROUTER_REFUSAL_SAMPLER_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace gantry::router {

class RefusalSampler {
 public:
  explicit RefusalSampler(int per_minute) : per_minute_(per_minute) {}

  struct Counted {
    std::string principal;
    int64_t since_us = 0, until_us = 0;  // Unix
    std::map<std::string, int64_t> reasons;  // error_reason -> refusals not recorded
    int64_t total = 0;
  };
  // Whether this refusal is recorded as its own event (else it is counted). `*ended`
  // gets the counts of the principal's minute that this refusal closed, if any.
  bool Take(const std::string& principal, const std::string& reason, int64_t now_us,
            std::optional<Counted>* ended);
  // Every minute with refusals counted, closed at `now_us`.
  std::vector<Counted> TakeAll(int64_t now_us);

 private:
  struct Window {
    int64_t since_us = 0;
    int recorded = 0;
    std::map<std::string, int64_t> counted;
  };
  static std::optional<Counted> Close(const std::string& principal, const Window& window,
                                      int64_t until_us);

  const int per_minute_;
  std::mutex mu_;
  std::map<std::string, Window> windows_;  // by principal (bounded by the policy's)
};

}  // namespace gantry::router

#endif  // GANTRY_ROUTER_REFUSAL_SAMPLER_H_
