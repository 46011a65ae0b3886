// Verification of the ledger's hash chains (`gantry ledger verify`).
//
// For every stream, in seq order: seq runs 0, 1, 2, ... without gaps; each event's
// prev_sha256 equals the sha256 of the event before it ("" for seq 0); and each
// event's sha256 equals the hash recomputed from its stored fields. An UPDATE that
// slipped past the append-only guards (a superuser with triggers disabled) breaks the
// recomputed hash of that row; a DELETE breaks the sequence or the next prev link.
//
// Thread-safety: stateless.
#ifndef GANTRY_LEDGER_VERIFY_H_
#define GANTRY_LEDGER_VERIFY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gantry::ledger {

struct BrokenLink {
  std::string stream_id;
  uint64_t seq = 0;
  std::string event_id;
  // "hash mismatch: stored X, recomputed Y", "prev_sha256 ...", "seq gap: expected N".
  std::string problem;
};

struct VerifyReport {
  uint64_t streams = 0;
  uint64_t events = 0;
  // The first broken link of each broken stream, in stream order.
  std::vector<BrokenLink> broken;
  bool ok() const { return broken.empty(); }
};

// Walks every chain (or only `stream_id` when given).
// Errors: UNAVAILABLE when Postgres cannot be reached.
absl::StatusOr<VerifyReport> VerifyLedger(const std::string& database_url,
                                          const std::string& stream_id = "");

}  // namespace gantry::ledger

#endif  // GANTRY_LEDGER_VERIFY_H_
