// The ledger key and what it protects (docs/ledger.md, "Keyed chain" and
// "Checkpoints"): the key file, HMAC-SHA-256 through OpenSSL, each event's mac in its
// writer's keyed chain, and the signed (HMACed) checkpoint files that anchor the head of
// every writer's chain outside Postgres.
//
// Key file: 64 lowercase hex digits (32 random bytes) and a newline, mode 0600 (no
// group or other bits), made by GenerateKeyFile (`gantry ledger setup`).
//
// Event mac: lowercase hex HMAC-SHA-256(key, M) where M is the line
// "gantry.ledger.mac.v1\n", then CanonicalEncoding(event) (event_hash.h), then three
// fields in the same "<decimal length>:<bytes>\n" form: writer_id, writer_seq
// (decimal), prev_mac.
//
// Checkpoint file "checkpoint-<writer_id>.json" in the writer's spool directory, one
// JSON object: {"format":"gantry.ledger.checkpoint.v1","writer_id","events" (how many of
// the writer's events are committed in Postgres), "head_mac" (the mac of the last of
// them, "" when none), "ts_unix_us", "hmac"}; hmac = HMAC-SHA-256(key,
// "gantry.ledger.checkpoint.v1\n" + the four fields, length-prefixed as above). Replaced
// atomically (written to a temporary file, fsync'd, renamed, the directory fsync'd).
//
// Thread-safety: pure functions, apart from the files they read and write.
#ifndef GANTRY_LEDGER_LEDGER_KEY_H_
#define GANTRY_LEDGER_LEDGER_KEY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gantry/v1/ledger.pb.h"

namespace gantry::ledger {

// The key file when none is named: $GANTRY_LEDGER_KEY, else $GANTRY_HOME/ledger.key
// ($GANTRY_HOME defaulting to $XDG_DATA_HOME/gantry or ~/.local/share/gantry).
std::string DefaultKeyFile();

// The 32 key bytes. Errors (reason in the message): NOT_FOUND ledger_key_missing;
// PERMISSION_DENIED ledger_key_exposed (group or other may read it); INVALID_ARGUMENT
// ledger_key_invalid (not 64 hex digits).
absl::StatusOr<std::string> ReadKeyFile(const std::string& path);

// Creates `path` (O_EXCL, mode 0600) with a fresh key from RAND_bytes.
// Errors: ALREADY_EXISTS when it exists; others from the OS or OpenSSL.
absl::Status GenerateKeyFile(const std::string& path);

// Lowercase hex HMAC-SHA-256.
std::string HmacSha256Hex(absl::string_view key, absl::string_view data);

// The mac of `event` (its mac field is ignored).
std::string EventMac(absl::string_view key, const v1::LedgerEvent& event);

// Constant-time comparison of two hex strings.
bool MacEqual(absl::string_view a, absl::string_view b);

struct Checkpoint {
  std::string writer_id;
  uint64_t events = 0;
  std::string head_mac;
  int64_t ts_unix_us = 0;
};

std::string CheckpointFileName(const std::string& writer_id);  // "checkpoint-<id>.json"

// Writes the checkpoint into `dir`, atomically. Errors: UNAVAILABLE from the OS.
absl::Status WriteCheckpoint(const std::string& dir, absl::string_view key,
                             const Checkpoint& checkpoint);

// Reads one checkpoint file and checks its hmac.
// Errors: DATA_LOSS checkpoint_forged (bad hmac or malformed); others from the OS.
absl::StatusOr<Checkpoint> ReadCheckpoint(const std::string& path, absl::string_view key);

// The checkpoint files under `dir` (recursively), sorted.
std::vector<std::string> FindCheckpointFiles(const std::string& dir);
// The writers' non-empty dead-letter files (dead-<writer>.log: events the database
// refused, ledger/writer.h) under `dir` (recursively), sorted.
std::vector<std::string> FindDeadLetterFiles(const std::string& dir);

}  // namespace gantry::ledger

#endif  // GANTRY_LEDGER_LEDGER_KEY_H_
