#include "router/event_recorder.h"

#include <utility>

#include "common/log.h"
#include "ledger/writer.h"

namespace gantry::router {

uint64_t LedgerRecorder::Mark() { return writer_->LastTicket(); }

void LedgerRecorder::WhenDurable(uint64_t ticket, int timeout_ms,
                                 std::function<void(absl::Status)> done) {
  writer_->WhenDurable(ticket, timeout_ms, std::move(done));
}

absl::Status LedgerRecorder::Healthy() const { return writer_->Healthy(); }

void LedgerRecorder::Record(const std::string& stream_id, const std::string& type,
                            const std::string& payload_json) {
  ledger::EventInput input;
  input.stream_id = stream_id;
  input.type = type;
  input.actor = "router";
  input.payload_json = payload_json;
  auto appended = writer_->Append(std::move(input));
  if (!appended.ok()) {
    Log(LogLevel::kError, "router.ledger_append_failed",
        {{"stream_id", stream_id}, {"type", type}, {"error", appended.status().ToString()}});
  }
}

}  // namespace gantry::router
