#include "ledger/verify.h"

#include <pqxx/pqxx>

#include "absl/strings/str_cat.h"
#include "gantry/v1/ledger.pb.h"
#include "ledger/event_hash.h"

namespace gantry::ledger {

absl::StatusOr<VerifyReport> VerifyLedger(const std::string& database_url,
                                          const std::string& stream_id) {
  VerifyReport report;
  try {
    pqxx::connection connection(database_url);
    pqxx::read_transaction tx(connection);
    // Keyset pagination keeps memory bounded on a large ledger.
    std::string last_stream;
    long long last_seq = -1;
    std::string current;
    uint64_t expected_seq = 0;
    std::string prev_hash;
    bool current_broken = false;
    constexpr int kPage = 5000;
    for (;;) {
      pqxx::result rows = tx.exec_params(
          "SELECT event_id, stream_id, seq, ts_unix_us, type, actor, payload_json, "
          "prev_sha256, sha256 FROM ledger_events "
          "WHERE ($1 = '' OR stream_id = $1) AND (stream_id, seq) > ($2, $3) "
          "ORDER BY stream_id, seq LIMIT $4",
          stream_id, last_stream, last_seq, kPage);
      for (const auto& row : rows) {
        v1::LedgerEvent e;
        e.set_event_id(row[0].as<std::string>());
        e.set_stream_id(row[1].as<std::string>());
        e.set_seq(row[2].as<uint64_t>());
        e.set_ts_unix_us(row[3].as<uint64_t>());
        e.set_type(row[4].as<std::string>());
        e.set_actor(row[5].as<std::string>());
        e.set_payload_json(row[6].as<std::string>());
        e.set_prev_sha256(row[7].as<std::string>());
        const std::string stored = row[8].as<std::string>();
        if (e.stream_id() != current) {
          current = e.stream_id();
          expected_seq = 0;
          prev_hash.clear();
          current_broken = false;
          ++report.streams;
        }
        ++report.events;
        std::string problem;
        const std::string recomputed = EventHash(e);
        if (e.seq() != expected_seq) {
          problem = absl::StrCat("seq gap: expected ", expected_seq, ", found ", e.seq());
        } else if (e.prev_sha256() != prev_hash) {
          problem = absl::StrCat("prev_sha256 ", e.prev_sha256(),
                                 " does not match the previous event's sha256 ", prev_hash);
        } else if (recomputed != stored) {
          problem = absl::StrCat("hash mismatch: stored ", stored, ", recomputed ", recomputed);
        }
        if (!problem.empty() && !current_broken) {
          report.broken.push_back({e.stream_id(), e.seq(), e.event_id(), problem});
          current_broken = true;
        }
        expected_seq = e.seq() + 1;
        prev_hash = stored;
        last_stream = e.stream_id();
        last_seq = static_cast<long long>(e.seq());
      }
      if (rows.size() < static_cast<size_t>(kPage)) break;
    }
  } catch (const pqxx::undefined_table&) {
    return absl::FailedPreconditionError(
        "this database holds no ledger (no ledger_events table; a writer creates it)");
  } catch (const pqxx::broken_connection& e) {
    return absl::UnavailableError(absl::StrCat("ledger database unreachable: ", e.what()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("ledger verify: ", e.what()));
  }
  return report;
}

}  // namespace gantry::ledger
