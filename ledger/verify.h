// Verification of the ledger's hash chains and keyed chains (`gantry ledger verify`).
//
// For every stream, in seq order: seq runs 0, 1, 2, ... without gaps; each event's
// prev_sha256 equals the sha256 of the event before it ("" for seq 0); each event's
// sha256 equals the hash recomputed from its stored fields; and each event's mac equals
// the HMAC recomputed under the ledger key (ledger_key.h). The unkeyed hash alone can be
// recomputed by whoever rewrites a stream; the mac cannot without the key, so a stream
// rewritten from its first event fails it (and a row without a mac is reported as
// unkeyed).
//
// A whole-ledger verify (no stream named) also walks each writer's chain in writer_seq
// order (0, 1, 2, ... and each prev_mac the mac before it), which catches whole events
// or streams deleted from the middle, and cross-checks the checkpoint files (HMACed
// heads of every writer's chain, kept outside Postgres in the spool directories): the
// ledger must hold at least `events` of that writer with the checkpoint's head mac at
// that place, which catches a truncation at the end. A writer with events but no
// checkpoint in the directories given is reported too (its end cannot be checked).
//
// Thread-safety: stateless.
#ifndef GANTRY_LEDGER_VERIFY_H_
#define GANTRY_LEDGER_VERIFY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gantry/v1/ledger.pb.h"

#include <pqxx/pqxx>

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
  uint64_t writers = 0;
  uint64_t checkpoints = 0;
  // The first broken link of each broken stream, in stream order.
  std::vector<BrokenLink> broken;
  bool ok() const { return broken.empty(); }
};

struct VerifyOptions {
  std::string database_url;
  std::string stream_id;  // "": the whole ledger (writer chains and checkpoints too)
  std::string key_file;   // "": DefaultKeyFile()
  // Directories searched (recursively) for checkpoint-*.json; whole-ledger verify only.
  std::vector<std::string> checkpoint_dirs;
  // Only the streams (each row's hash, links and mac): no writer chains, no checkpoints.
  bool streams_only = false;
};

// The columns of ledger_events in the order LedgerEventFromRow reads them.
extern const char kLedgerEventColumns[];
// An event as stored (a row selected with kLedgerEventColumns); NULL writer columns
// (rows from before the keyed chain) come back empty.
v1::LedgerEvent LedgerEventFromRow(const pqxx::row& row);

// Errors: UNAVAILABLE when Postgres cannot be reached; the key file's errors
// (ledger_key_missing, ...); DATA_LOSS checkpoint_forged for a checkpoint file whose
// hmac does not match.
absl::StatusOr<VerifyReport> VerifyLedger(const VerifyOptions& options);

// One stream (or every stream, without writer chains or checkpoints), with the default
// key file.
absl::StatusOr<VerifyReport> VerifyLedger(const std::string& database_url,
                                          const std::string& stream_id = "");

}  // namespace gantry::ledger

#endif  // GANTRY_LEDGER_VERIFY_H_
