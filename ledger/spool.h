// The writer's local durable spool: an append-only file of ledger events that holds
// every event Postgres has not confirmed, in order (docs/ledger.md, "Spool").
//
// Record layout, repeated:
//   u32 little-endian  length of the body
//   8 bytes            the first 8 bytes of SHA-256(body)
//   body               a serialized gantry.v1.LedgerEvent
// Append() writes whole records and fsyncs before returning, so an acknowledged event
// survives a crash. A torn last record (a crash during write) fails its length or
// checksum and is ignored by ReadAll(), together with anything after it; it was never
// acknowledged.
//
// Thread-safety: not thread-safe; the writer's flush thread owns its spool.
#ifndef GANTRY_LEDGER_SPOOL_H_
#define GANTRY_LEDGER_SPOOL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gantry/v1/ledger.pb.h"

namespace gantry::ledger {

class Spool {
 public:
  // Opens (creating if needed) `path` for appending and takes an exclusive flock on it,
  // so two live writers never share a spool.
  // Errors: UNAVAILABLE when another process holds the lock; others from the OS.
  static absl::StatusOr<std::unique_ptr<Spool>> Open(const std::string& path);
  ~Spool();

  // Appends and fsyncs. Errors: DATA_LOSS / UNAVAILABLE from the OS (disk full, ...).
  absl::Status Append(const std::vector<v1::LedgerEvent>& events);

  // Every intact record, in order. `torn_bytes`, when given, receives the size of an
  // ignored torn tail (0 when the file is intact).
  absl::StatusOr<std::vector<v1::LedgerEvent>> ReadAll(size_t* torn_bytes = nullptr) const;

  // Reads up to `max_events` intact records starting at byte `offset`; `next_offset`
  // receives where the next read starts. Fewer than max_events means the end (or a
  // torn tail) was reached. Memory stays bounded by max_events records.
  absl::StatusOr<std::vector<v1::LedgerEvent>> ReadFrom(size_t offset, size_t max_events,
                                                        size_t* next_offset) const;

  // Empties the file (after its events are confirmed in Postgres) and fsyncs.
  absl::Status Clear();

  bool empty() const { return size_ == 0; }
  const std::string& path() const { return path_; }

 private:
  Spool(std::string path, int fd, size_t size) : path_(std::move(path)), fd_(fd), size_(size) {}

  std::string path_;
  int fd_;
  size_t size_;
};

// Writes all of `bytes` to `fd` (retrying short writes and EINTR). Errors: UNAVAILABLE
// naming `path`.
absl::Status WriteFully(int fd, const std::string& bytes, const std::string& path);

// Reads the records of a spool file that is not open (an orphan of a crashed writer).
absl::StatusOr<std::vector<v1::LedgerEvent>> ReadSpoolFile(const std::string& path,
                                                           size_t* torn_bytes = nullptr);

}  // namespace gantry::ledger

#endif  // GANTRY_LEDGER_SPOOL_H_
