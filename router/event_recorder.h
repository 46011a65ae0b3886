// Where the gateway's ledger events go, and when they are durable.
#ifndef GANTRY_ROUTER_EVENT_RECORDER_H_
#define GANTRY_ROUTER_EVENT_RECORDER_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"

namespace gantry::ledger {
class LedgerWriter;
}  // namespace gantry::ledger

namespace gantry::router {

// Where ledger events go. LedgerRecorder writes through ledger::LedgerWriter; tests
// record in memory. Record() must not block for long (LedgerWriter queues).
// Durability (docs/ledger.md, "Durability"): a request's Terminal reaches its client only
// once Mark() (taken after its outcome was recorded) is durable; WhenDurable answers on
// the recorder's thread, without blocking. Healthy() not OK (the spool failed) makes the
// gateway refuse new work with 503 evidence_unavailable. The defaults: in memory, always
// durable.
class EventRecorder {
 public:
  virtual ~EventRecorder() = default;
  virtual void Record(const std::string& stream_id, const std::string& type,
                      const std::string& payload_json) = 0;
  // A ticket covering every event recorded so far (0: nothing to wait for).
  virtual uint64_t Mark() { return 0; }
  virtual void WhenDurable(uint64_t ticket, int timeout_ms,
                           std::function<void(absl::Status)> done) {
    (void)ticket;
    (void)timeout_ms;
    done(absl::OkStatus());
  }
  virtual absl::Status Healthy() const { return absl::OkStatus(); }
};

class LedgerRecorder : public EventRecorder {
 public:
  explicit LedgerRecorder(ledger::LedgerWriter* writer) : writer_(writer) {}
  void Record(const std::string& stream_id, const std::string& type,
              const std::string& payload_json) override;
  uint64_t Mark() override;
  void WhenDurable(uint64_t ticket, int timeout_ms,
                   std::function<void(absl::Status)> done) override;
  absl::Status Healthy() const override;

 private:
  ledger::LedgerWriter* writer_;
};

}  // namespace gantry::router

#endif  // GANTRY_ROUTER_EVENT_RECORDER_H_
