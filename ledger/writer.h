// LedgerWriter: the one way services put evidence into the ledger (docs/ledger.md).
//
// Append() assigns the event id, the sequence number within its stream, the timestamp,
// the previous hash and the event's own hash, then queues the event; a background
// thread inserts queued events into Postgres in batches (one transaction per batch,
// idempotent on event_id). When Postgres cannot be reached, batches go to a local
// durable spool (fsync'd) instead, and every later event follows them there until the
// spool has been replayed, in order, into Postgres: nothing is lost or reordered.
//
// Streams: each stream (a request "req_...", a task "task_...") has exactly one writer
// at a time. A stream this writer did not start must be resumed with ResumeStream()
// before appending; a stream Append() has not seen is taken to be new (seq 0). A
// second writer on the same stream cannot fork it silently: (stream_id, seq) is unique
// in Postgres, and a conflicting event is kept in a dead-letter spool and logged.
//
// Memory is bounded: Append() blocks while `max_queued` events wait. Flush() waits until
// every event appended before it is durable (in Postgres or in the spool).
//
// Thread-safety: Append, Flush, ResumeStream and GetStats are thread-safe.
#ifndef GANTRY_LEDGER_WRITER_H_
#define GANTRY_LEDGER_WRITER_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "gantry/v1/ledger.pb.h"

namespace gantry::ledger {

class Spool;
struct DbConnection;  // a pqxx::connection (libpqxx 6 has no forward-declarable type)

struct WriterOptions {
  // libpq connection URL, e.g. "postgresql://gantry@/gantry?host=/run/gantry".
  std::string database_url;
  // Directory for this host's spools (created if missing). Each writer owns one file
  // "spool-<id>.log" in it and adopts the files of writers that died.
  std::string spool_dir;
  size_t max_batch = 1000;
  int flush_interval_ms = 5;
  size_t max_queued = 100000;
  // How often to try Postgres again while spooling.
  int retry_interval_ms = 500;
  // Write through the insert-only role (SET ROLE gantry_ledger_writer).
  bool use_writer_role = true;
  const Clock* clock = &SystemClock();
};

struct EventInput {
  std::string stream_id;
  std::string type;
  std::string actor;
  // A JSON object; stored canonically (compact, keys sorted).
  std::string payload_json = "{}";
};

struct WriterStats {
  uint64_t appended = 0;
  uint64_t inserted = 0;     // committed to Postgres directly
  uint64_t spooled = 0;      // written to the spool
  uint64_t replayed = 0;     // moved from the spool into Postgres
  uint64_t dead_letters = 0; // refused by Postgres (a forked stream); kept on disk
  bool spooling = false;
};

class LedgerWriter {
 public:
  // Opens the spool, adopts orphaned spools, and tries Postgres (applying migrations).
  // Postgres being down is not an error: the writer starts in spooling mode.
  // Errors: INVALID_ARGUMENT (options); UNAVAILABLE / others when the spool cannot be
  // opened.
  static absl::StatusOr<std::unique_ptr<LedgerWriter>> Start(WriterOptions options);

  // Flushes what it can (into Postgres or the spool) and stops the thread.
  ~LedgerWriter();

  // The event as recorded (ids, seq, hashes filled in).
  // Errors: INVALID_ARGUMENT when stream_id, type or actor is empty or the payload is
  // not a JSON object.
  absl::StatusOr<v1::LedgerEvent> Append(EventInput input);

  // Errors: DEADLINE_EXCEEDED when not durable in time; DATA_LOSS when the spool
  // cannot be written (then nothing newer is acknowledged).
  absl::Status Flush(int timeout_ms);

  // Loads the tail (last seq and hash) of an existing stream from Postgres.
  // Errors: UNAVAILABLE when Postgres cannot be reached.
  absl::Status ResumeStream(const std::string& stream_id);

  WriterStats GetStats() const;

 private:
  struct StreamTail {
    uint64_t next_seq = 0;
    std::string last_sha256;
  };

  explicit LedgerWriter(WriterOptions options);
  void Run();
  // Inserts `events` in one transaction. OK, UNAVAILABLE (connection-level: spool and
  // retry), or another code (the batch holds an event Postgres refuses).
  absl::Status InsertBatch(const std::vector<v1::LedgerEvent>& events);
  absl::Status InsertOneByOne(const std::vector<v1::LedgerEvent>& events);
  bool EnsureConnected();
  void Disconnect();
  absl::Status ReplaySpool();
  void HandleBatch(std::vector<v1::LedgerEvent> batch);

  const WriterOptions options_;
  std::unique_ptr<Spool> spool_;
  std::unique_ptr<Spool> dead_letters_;
  std::unique_ptr<DbConnection> connection_;
  int64_t last_attempt_us_ = 0;

  mutable std::mutex mu_;
  std::condition_variable queue_cv_;    // the flush thread waits for events
  std::condition_variable space_cv_;    // Append waits for room
  std::condition_variable durable_cv_;  // Flush waits for durability
  std::deque<v1::LedgerEvent> queue_;
  std::unordered_map<std::string, StreamTail> streams_;
  uint64_t appended_ = 0;
  uint64_t durable_ = 0;
  absl::Status sticky_error_;
  bool stopping_ = false;
  WriterStats stats_;
  std::thread thread_;
};

}  // namespace gantry::ledger

#endif  // GANTRY_LEDGER_WRITER_H_
