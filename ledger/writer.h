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
// Memory is bounded: Append() blocks while `max_queued` events, or `max_queued_bytes` of
// payloads, wait (an event larger than that alone waits for an empty queue). Flush() waits until
// every event appended before it is durable (in Postgres or in the spool).
//
// Integrity (docs/ledger.md, "Roles", "Keyed chain", "Checkpoints"): the writer logs in
// as the insert-only role itself (database_url names it) and refuses a session that
// could change what it wrote (schema.h, CheckWriterSession); it never migrates. Every
// event also carries this writer's keyed chain (writer_id, writer_seq, prev_mac, mac:
// HMAC-SHA-256 under the ledger key), and the head of that chain as committed in
// Postgres is checkpointed to an HMACed file in the spool directory.
//
// Durability acks (group commit): Append() returns the event's ticket (`ticket` out
// parameter: its position among this writer's events, from 1); WhenDurable(ticket)
// calls back once every event up to it is committed or fsync'd, or failed. One
// transaction or one fsync covers all the events queued meanwhile. A spool that cannot
// be written makes the writer unhealthy for good (Healthy() is DATA_LOSS): nothing
// newer is acknowledged, and callers refuse new work.
//
// Thread-safety: Append, Flush, ResumeStream and GetStats are thread-safe.
#ifndef GANTRY_LEDGER_WRITER_H_
#define GANTRY_LEDGER_WRITER_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
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
  size_t max_queued_bytes = 256u << 20;
  // How often to try Postgres again while spooling.
  int retry_interval_ms = 500;
  // The ledger key (ledger_key.h); "" means DefaultKeyFile(). Required: a writer
  // without its key does not start.
  std::string key_file;
  // How often the head of this writer's keyed chain, as committed in Postgres, is
  // checkpointed to "checkpoint-<writer id>.json" in spool_dir (and at start and stop).
  int checkpoint_interval_ms = 1000;
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
  absl::StatusOr<v1::LedgerEvent> Append(EventInput input, uint64_t* ticket = nullptr);

  // How many events have been appended so far: a ticket that covers all of them.
  uint64_t LastTicket() const;

  // `done` runs once, with OK when every event up to `ticket` is durable, DATA_LOSS when
  // the spool failed, DEADLINE_EXCEEDED when `timeout_ms` passed first. It runs on the
  // writer's thread (or at once, on the caller's, when already decided) and must not
  // block.
  void WhenDurable(uint64_t ticket, int timeout_ms, std::function<void(absl::Status)> done);

  // Blocks until WhenDurable's answer. Same errors.
  absl::Status WaitDurable(uint64_t ticket, int timeout_ms);

  // OK, or the sticky spool failure (DATA_LOSS).
  absl::Status Healthy() const;

  const std::string& writer_id() const { return writer_id_; }

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
  // Notes committed events of this writer (for the checkpoint).
  void NoteCommitted(const std::vector<v1::LedgerEvent>& events);
  // Writes the checkpoint when due (or `force`). Errors from the OS.
  absl::Status MaybeCheckpoint(bool force);
  // Answers the WhenDurable waiters that are decided (under mu_; returns them to run).
  void CollectDecided(int64_t now_us, std::vector<std::pair<std::function<void(absl::Status)>,
                                                           absl::Status>>* out);

  struct Waiter {
    uint64_t ticket;
    int64_t deadline_us;  // monotonic
    std::function<void(absl::Status)> done;
  };

  const WriterOptions options_;
  std::string key_;
  std::string writer_id_;
  // This writer's keyed chain: the next writer_seq and the last mac (under mu_), and
  // its head as committed in Postgres (flush thread only).
  uint64_t next_writer_seq_ = 0;
  std::string last_mac_;
  uint64_t committed_events_ = 0;
  std::string committed_mac_;
  uint64_t checkpointed_events_ = 0;
  bool checkpoint_written_ = false;
  int64_t last_checkpoint_us_ = 0;
  std::unique_ptr<Spool> spool_;
  std::unique_ptr<Spool> dead_letters_;
  std::unique_ptr<DbConnection> connection_;
  int64_t last_attempt_us_ = 0;

  mutable std::mutex mu_;
  std::condition_variable queue_cv_;    // the flush thread waits for events
  std::condition_variable space_cv_;    // Append waits for room
  std::condition_variable durable_cv_;  // Flush waits for durability
  std::deque<v1::LedgerEvent> queue_;
  size_t queued_bytes_ = 0;  // payload bytes of queue_
  std::unordered_map<std::string, StreamTail> streams_;
  uint64_t appended_ = 0;
  uint64_t durable_ = 0;
  absl::Status sticky_error_;
  std::multimap<uint64_t, Waiter> waiters_;  // by ticket
  bool stopping_ = false;
  WriterStats stats_;
  std::thread thread_;
};

}  // namespace gantry::ledger

#endif  // GANTRY_LEDGER_WRITER_H_
