#include "ledger/writer.h"

#include <dirent.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <pqxx/pqxx>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/ids.h"
#include "common/json.h"
#include "common/log.h"
#include "common/status.h"
#include "ledger/event_hash.h"
#include "ledger/ledger_key.h"
#include "ledger/schema.h"
#include "ledger/spool.h"

namespace gantry::ledger {

struct DbConnection {
  explicit DbConnection(const std::string& url) : c(url) {}
  pqxx::connection c;
};

namespace {

// Whether a failed statement means "the server or the connection is not there" (spool
// and retry) rather than "Postgres refuses this data". SQLSTATE class 08 (connection
// exception), 57P01-57P03 (shutdown, cannot connect now), 53 (insufficient resources).
// libpqxx 6 does not always fill sqlstate(); then a closed connection decides.
bool IsConnectionTrouble(const pqxx::sql_error& e, bool connection_open) {
  const std::string state = e.sqlstate();
  if (state.empty()) return !connection_open;
  return absl::StartsWith(state, "08") || absl::StartsWith(state, "57P") ||
         absl::StartsWith(state, "53");
}

std::string CanonicalPayload(const json::Value& value) {
  json::DumpOptions options;
  options.item_separator = ",";
  options.key_separator = ":";
  options.sort_keys = true;
  return json::Dump(value, options);
}

}  // namespace

LedgerWriter::LedgerWriter(WriterOptions options) : options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<LedgerWriter>> LedgerWriter::Start(WriterOptions options) {
  if (options.spool_dir.empty() || options.max_batch == 0 || options.max_queued == 0) {
    return absl::InvalidArgumentError("ledger writer needs spool_dir, max_batch, max_queued");
  }
  std::error_code ignored;
  std::filesystem::create_directories(options.spool_dir, ignored);
  ::chmod(options.spool_dir.c_str(), 0700);
  if (options.key_file.empty()) options.key_file = DefaultKeyFile();
  auto key = ReadKeyFile(options.key_file);
  if (!key.ok()) return key.status();
  std::unique_ptr<LedgerWriter> writer(new LedgerWriter(std::move(options)));
  writer->key_ = std::move(*key);
  const std::string own_id = NewId("w");
  writer->writer_id_ = own_id;
  auto spool = Spool::Open(absl::StrCat(writer->options_.spool_dir, "/spool-", own_id, ".log"));
  if (!spool.ok()) return spool.status();
  writer->spool_ = std::move(*spool);
  auto dead = Spool::Open(absl::StrCat(writer->options_.spool_dir, "/dead-", own_id, ".log"));
  if (!dead.ok()) return dead.status();
  writer->dead_letters_ = std::move(*dead);

  // Adopt the spools of writers that died: move their events into ours, in order.
  if (DIR* dir = ::opendir(writer->options_.spool_dir.c_str())) {
    while (dirent* entry = ::readdir(dir)) {
      std::string name = entry->d_name;
      if (!absl::StartsWith(name, "spool-") || !absl::EndsWith(name, ".log")) continue;
      std::string path = absl::StrCat(writer->options_.spool_dir, "/", name);
      if (path == writer->spool_->path()) continue;
      auto orphan = Spool::Open(path);  // fails while its owner is alive (flock)
      if (!orphan.ok()) continue;
      size_t torn = 0;
      auto events = (*orphan)->ReadAll(&torn);
      if (!events.ok()) continue;
      if (!events->empty()) {
        absl::Status adopted = writer->spool_->Append(*events);
        if (!adopted.ok()) return adopted;
      }
      Log(LogLevel::kWarning, "ledger.spool.adopted",
          {{"path", path}, {"events", std::to_string(events->size())},
           {"torn_bytes", std::to_string(torn)}});
      ::unlink(path.c_str());
    }
    ::closedir(dir);
  }
  writer->stats_.spooling = !writer->spool_->empty();
  // The checkpoint says at once that this writer exists (0 events): deleting every
  // event it will write is then a truncation verify sees.
  absl::Status anchored = writer->MaybeCheckpoint(/*force=*/true);
  if (!anchored.ok()) return anchored;
  writer->EnsureConnected();
  writer->thread_ = std::thread([w = writer.get()] { w->Run(); });
  return writer;
}

LedgerWriter::~LedgerWriter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  queue_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // Whoever still waits hears that its events were not acknowledged.
  std::multimap<uint64_t, Waiter> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    left.swap(waiters_);
  }
  for (auto& [ticket, waiter] : left) {
    waiter.done(ticket <= durable_ ? absl::OkStatus()
                                   : absl::UnavailableError("ledger writer stopped"));
  }
}

absl::StatusOr<v1::LedgerEvent> LedgerWriter::Append(EventInput input, uint64_t* ticket) {
  if (input.stream_id.empty() || input.type.empty() || input.actor.empty()) {
    return absl::InvalidArgumentError("ledger event needs stream_id, type and actor");
  }
  auto payload = json::Parse(input.payload_json);
  if (!payload.ok()) return payload.status();
  if (!payload->is_object()) {
    return absl::InvalidArgumentError("ledger event payload must be a JSON object");
  }
  v1::LedgerEvent event;
  event.set_event_id(NewId("evt"));
  event.set_stream_id(std::move(input.stream_id));
  event.set_type(std::move(input.type));
  event.set_actor(std::move(input.actor));
  event.set_payload_json(CanonicalPayload(*payload));

  std::unique_lock<std::mutex> lock(mu_);
  const size_t bytes = event.payload_json().size();
  space_cv_.wait(lock, [&] {
    return stopping_ || queue_.empty() ||
           (queue_.size() < options_.max_queued &&
            queued_bytes_ + bytes <= options_.max_queued_bytes);
  });
  if (stopping_) return absl::FailedPreconditionError("ledger writer is stopping");
  // Sequence, timestamp and chain are assigned under the lock, in queue order, so the
  // chain order is the insertion order.
  StreamTail& tail = streams_[event.stream_id()];
  event.set_seq(tail.next_seq);
  event.set_ts_unix_us(static_cast<uint64_t>(options_.clock->UnixMicros()));
  event.set_prev_sha256(tail.last_sha256);
  event.set_sha256(EventHash(event));
  event.set_writer_id(writer_id_);
  event.set_writer_seq(next_writer_seq_);
  event.set_prev_mac(last_mac_);
  event.set_mac(EventMac(key_, event));
  tail.next_seq += 1;
  tail.last_sha256 = event.sha256();
  next_writer_seq_ += 1;
  last_mac_ = event.mac();
  queue_.push_back(event);
  queued_bytes_ += bytes;
  ++appended_;
  if (ticket != nullptr) *ticket = appended_;
  ++stats_.appended;
  lock.unlock();
  queue_cv_.notify_one();
  return event;
}

absl::Status LedgerWriter::Flush(int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = appended_;
  queue_cv_.notify_one();
  bool done = durable_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] {
    return durable_ >= target || !sticky_error_.ok();
  });
  if (!sticky_error_.ok()) return sticky_error_;
  if (!done) {
    return absl::DeadlineExceededError(
        absl::StrCat("ledger: ", target - durable_, " events not yet durable"));
  }
  return absl::OkStatus();
}

uint64_t LedgerWriter::LastTicket() const {
  std::lock_guard<std::mutex> lock(mu_);
  return appended_;
}

absl::Status LedgerWriter::Healthy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sticky_error_;
}

void LedgerWriter::WhenDurable(uint64_t ticket, int timeout_ms,
                               std::function<void(absl::Status)> done) {
  absl::Status now;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!sticky_error_.ok()) {
      now = sticky_error_;
    } else if (durable_ >= ticket) {
      now = absl::OkStatus();
    } else {
      waiters_.emplace(ticket, Waiter{ticket,
                                      options_.clock->MonotonicMicros() + timeout_ms * 1000LL,
                                      std::move(done)});
      queue_cv_.notify_one();
      return;
    }
  }
  done(now);
}

absl::Status LedgerWriter::WaitDurable(uint64_t ticket, int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  queue_cv_.notify_one();
  bool done = durable_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] {
    return durable_ >= ticket || !sticky_error_.ok();
  });
  if (!sticky_error_.ok()) return sticky_error_;
  if (!done) {
    return absl::DeadlineExceededError(
        absl::StrCat("ledger: ", ticket - durable_, " events not yet durable"));
  }
  return absl::OkStatus();
}

void LedgerWriter::CollectDecided(
    int64_t now_us,
    std::vector<std::pair<std::function<void(absl::Status)>, absl::Status>>* out) {
  if (waiters_.empty()) return;
  if (!sticky_error_.ok()) {
    for (auto& [t, w] : waiters_) out->emplace_back(std::move(w.done), sticky_error_);
    waiters_.clear();
    return;
  }
  while (!waiters_.empty() && waiters_.begin()->first <= durable_) {
    out->emplace_back(std::move(waiters_.begin()->second.done), absl::OkStatus());
    waiters_.erase(waiters_.begin());
  }
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (it->second.deadline_us <= now_us) {
      out->emplace_back(std::move(it->second.done),
                        absl::DeadlineExceededError(absl::StrCat(
                            "ledger: event ", it->first, " not durable in time (",
                            it->first - durable_, " behind)")));
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
}

void LedgerWriter::NoteCommitted(const std::vector<v1::LedgerEvent>& events) {
  // Inserted in queue order, which is this writer's chain order; events adopted from
  // another writer's spool belong to that writer's chain (and checkpoint).
  for (const auto& e : events) {
    if (e.writer_id() != writer_id_ || e.writer_seq() + 1 <= committed_events_) continue;
    committed_events_ = e.writer_seq() + 1;
    committed_mac_ = e.mac();
  }
}

absl::Status LedgerWriter::MaybeCheckpoint(bool force) {
  const int64_t now = options_.clock->MonotonicMicros();
  if (!force) {
    if (committed_events_ == checkpointed_events_ && checkpoint_written_) return absl::OkStatus();
    if (now - last_checkpoint_us_ < options_.checkpoint_interval_ms * 1000LL) {
      return absl::OkStatus();
    }
  }
  Checkpoint c;
  c.writer_id = writer_id_;
  c.events = committed_events_;
  c.head_mac = committed_mac_;
  c.ts_unix_us = options_.clock->UnixMicros();
  last_checkpoint_us_ = now;
  absl::Status written = WriteCheckpoint(options_.spool_dir, key_, c);
  if (!written.ok()) return written;
  checkpointed_events_ = committed_events_;
  checkpoint_written_ = true;
  return absl::OkStatus();
}

absl::Status LedgerWriter::ResumeStream(const std::string& stream_id) {
  try {
    pqxx::connection connection(options_.database_url);
    pqxx::read_transaction tx(connection);
    pqxx::result r = tx.exec_params(
        "SELECT seq, sha256 FROM ledger_events WHERE stream_id = $1 ORDER BY seq DESC LIMIT 1",
        stream_id);
    std::lock_guard<std::mutex> lock(mu_);
    StreamTail& tail = streams_[stream_id];
    if (!r.empty()) {
      tail.next_seq = r[0][0].as<uint64_t>() + 1;
      tail.last_sha256 = r[0][1].as<std::string>();
    }
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("ledger: cannot resume ", stream_id, ": ", e.what()));
  }
}

WriterStats LedgerWriter::GetStats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

bool LedgerWriter::EnsureConnected() {
  if (connection_ && connection_->c.is_open()) return true;
  const int64_t now = options_.clock->MonotonicMicros();
  if (last_attempt_us_ != 0 && now - last_attempt_us_ < options_.retry_interval_ms * 1000LL) {
    return false;
  }
  last_attempt_us_ = now;
  try {
    auto connection = std::make_unique<DbConnection>(options_.database_url);
    // The writer never migrates, and never writes through a login that could change
    // what it wrote: such a database is treated as unreachable (events stay spooled).
    absl::Status checked = CheckWriterSession(connection->c);
    if (!checked.ok()) {
      Log(LogLevel::kError, "ledger.writer.refused",
          {{"reason", ReasonOf(checked)}, {"error", checked.ToString()}});
      return false;
    }
    connection_ = std::move(connection);
    Log(LogLevel::kInfo, "ledger.connected");
    return true;
  } catch (const std::exception& e) {
    Log(LogLevel::kWarning, "ledger.unreachable", {{"error", e.what()}});
    return false;
  }
}

void LedgerWriter::Disconnect() { connection_.reset(); }

absl::Status LedgerWriter::InsertBatch(const std::vector<v1::LedgerEvent>& events) {
  if (!EnsureConnected()) return absl::UnavailableError("ledger database unreachable");
  try {
    pqxx::work tx(connection_->c);
    std::string sql =
        "INSERT INTO ledger_events (event_id, stream_id, seq, ts_unix_us, type, actor, "
        "payload_json, prev_sha256, sha256, writer_id, writer_seq, prev_mac, mac) VALUES ";
    for (size_t i = 0; i < events.size(); ++i) {
      const auto& e = events[i];
      absl::StrAppend(&sql, i ? "," : "", "(", tx.quote(e.event_id()), ",",
                      tx.quote(e.stream_id()), ",", e.seq(), ",", e.ts_unix_us(), ",",
                      tx.quote(e.type()), ",", tx.quote(e.actor()), ",",
                      tx.quote(e.payload_json()), ",", tx.quote(e.prev_sha256()), ",",
                      tx.quote(e.sha256()), ",", tx.quote(e.writer_id()), ",", e.writer_seq(),
                      ",", tx.quote(e.prev_mac()), ",", tx.quote(e.mac()), ")");
    }
    sql += " ON CONFLICT (event_id) DO NOTHING RETURNING event_id";
    pqxx::result inserted = tx.exec(sql);
    {  // by id, not by count: an owner's trigger may rewrite the ids it stores
      // Not inserted: a replay of an event already stored (the spool after an
      // in-doubt commit), or dropped without an error (an owner's trigger returning
      // NULL, a DO INSTEAD rule; found by a red team: clients got their answers while
      // the events were not stored). Only a stored event with the same mac counts.
      std::set<std::string> returned;
      for (const auto& row : inserted) returned.insert(row[0].as<std::string>());
      for (const auto& e : events) {
        if (returned.count(e.event_id())) continue;
        pqxx::result stored = tx.exec_params(
            "SELECT mac FROM ledger_events WHERE event_id = $1", e.event_id());
        if (stored.empty() || stored[0][0].is_null() || stored[0][0].as<std::string>() != e.mac()) {
          return absl::FailedPreconditionError(absl::StrCat(
              "event ", e.event_id(), " was not stored and raised no error (a trigger or "
              "rule of the database's owner dropped it)"));
        }
      }
    }
    tx.commit();
    NoteCommitted(events);
    return absl::OkStatus();
  } catch (const pqxx::broken_connection& e) {
    Disconnect();
    return absl::UnavailableError(e.what());
  } catch (const pqxx::in_doubt_error& e) {
    // The commit may or may not have happened; the spool replay is idempotent.
    Disconnect();
    return absl::UnavailableError(e.what());
  } catch (const pqxx::integrity_constraint_violation& e) {
    return absl::FailedPreconditionError(e.what());
  } catch (const pqxx::sql_error& e) {
    if (IsConnectionTrouble(e, connection_ && connection_->c.is_open())) {
      Disconnect();
      return absl::UnavailableError(e.what());
    }
    return absl::FailedPreconditionError(e.what());
  } catch (const std::exception& e) {
    Disconnect();
    return absl::UnavailableError(e.what());
  }
}

absl::Status LedgerWriter::InsertOneByOne(const std::vector<v1::LedgerEvent>& events) {
  absl::Status refused = absl::OkStatus();
  for (const auto& event : events) {
    absl::Status status = InsertBatch({event});
    if (status.ok()) continue;
    if (absl::IsUnavailable(status)) return status;
    // Refused (a forked stream, a trigger or a revoked grant of the owner's): keep the
    // evidence on disk, never drop it; but it is not in the ledger, so it is not
    // durable there, and nothing from here on may be acknowledged (found by a red team:
    // an owner's BEFORE INSERT trigger made every event a dead letter while clients got
    // their answers and verify passed).
    Log(LogLevel::kError, "ledger.event.refused",
        {{"event_id", event.event_id()}, {"stream_id", event.stream_id()},
         {"seq", std::to_string(event.seq())}, {"error", status.ToString()}});
    absl::Status kept = dead_letters_->Append({event});
    if (!kept.ok()) return kept;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.dead_letters;
    }
    if (refused.ok()) {
      refused = absl::DataLossError(absl::StrCat(
          "the ledger database refused event ", event.event_id(), " (kept in the dead-letter "
          "file): ", status.message()));
    }
  }
  return refused;
}

absl::Status LedgerWriter::ReplaySpool() {
  absl::Status refused = absl::OkStatus();
  size_t offset = 0;
  uint64_t replayed = 0;
  for (;;) {
    size_t next = 0;
    auto events = spool_->ReadFrom(offset, options_.max_batch, &next);
    if (!events.ok()) return events.status();
    if (events->empty()) break;
    absl::Status status = InsertBatch(*events);
    if (!status.ok() && !absl::IsUnavailable(status)) status = InsertOneByOne(*events);
    if (absl::IsDataLoss(status) && refused.ok()) refused = status;  // kept as dead letters
    if (!status.ok() && !absl::IsDataLoss(status)) return status;
    replayed += events->size();
    offset = next;
  }
  absl::Status cleared = spool_->Clear();
  if (!cleared.ok()) return cleared;
  std::lock_guard<std::mutex> lock(mu_);
  stats_.replayed += replayed;
  stats_.spooling = false;
  if (!refused.ok() && sticky_error_.ok()) {
    sticky_error_ = refused;  // nothing newer is acknowledged (InsertOneByOne)
    Log(LogLevel::kError, "ledger.writer.refused_events", {{"error", refused.ToString()}});
  }
  Log(LogLevel::kInfo, "ledger.spool.replayed", {{"events", std::to_string(replayed)}});
  return absl::OkStatus();
}

void LedgerWriter::HandleBatch(std::vector<v1::LedgerEvent> batch) {
  absl::Status status = absl::OkStatus();
  bool spooled = false;
  if (spool_->empty()) {
    status = InsertBatch(batch);
    if (!status.ok() && !absl::IsUnavailable(status)) status = InsertOneByOne(batch);
    if (absl::IsUnavailable(status)) {
      Log(LogLevel::kWarning, "ledger.spooling", {{"error", status.ToString()}});
      status = spool_->Append(batch);
      spooled = true;
    }
  } else {
    // Order: while anything is spooled, everything newer goes behind it.
    status = spool_->Append(batch);
    spooled = true;
  }
  std::vector<std::pair<std::function<void(absl::Status)>, absl::Status>> decided;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!status.ok()) {
      // The spool failed (disk), or the database refused events: nothing newer may be
      // acknowledged.
      if (absl::IsDataLoss(status)) {
        sticky_error_ = status;
        Log(LogLevel::kError, "ledger.writer.refused_events", {{"error", status.ToString()}});
      } else {
        sticky_error_ = absl::DataLossError(absl::StrCat("ledger spool: ", status.ToString()));
        Log(LogLevel::kError, "ledger.spool.failed", {{"error", status.ToString()}});
      }
    } else {
      durable_ += batch.size();
      if (spooled) {
        stats_.spooled += batch.size();
        stats_.spooling = true;
      } else {
        stats_.inserted += batch.size();
      }
    }
    CollectDecided(options_.clock->MonotonicMicros(), &decided);
  }
  durable_cv_.notify_all();
  for (auto& [done, result] : decided) done(result);
}

void LedgerWriter::Run() {
  pthread_setname_np(pthread_self(), "ledger-writer");  // shown by top -H and perf
  for (;;) {
    std::vector<v1::LedgerEvent> batch;
    bool stopping;
    {
      std::unique_lock<std::mutex> lock(mu_);
      queue_cv_.wait_for(lock, std::chrono::milliseconds(options_.flush_interval_ms),
                         [&] { return !queue_.empty() || stopping_; });
      while (!queue_.empty() && batch.size() < options_.max_batch) {
        queued_bytes_ -= queue_.front().payload_json().size();
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      stopping = stopping_ && queue_.empty();
    }
    space_cv_.notify_all();
    if (!batch.empty()) HandleBatch(std::move(batch));
    if (!spool_->empty() && EnsureConnected()) {
      absl::Status replayed = ReplaySpool();
      if (!replayed.ok()) {
        Log(LogLevel::kWarning, "ledger.spool.replay_failed", {{"error", replayed.ToString()}});
      }
    }
    absl::Status anchored = MaybeCheckpoint(/*force=*/stopping);
    std::vector<std::pair<std::function<void(absl::Status)>, absl::Status>> decided;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!anchored.ok() && sticky_error_.ok()) {
        // The anchor of the chain cannot be written: as bad as a spool that cannot.
        sticky_error_ = absl::DataLossError(absl::StrCat("ledger checkpoint: ", anchored.ToString()));
        Log(LogLevel::kError, "ledger.checkpoint.failed", {{"error", anchored.ToString()}});
      }
      CollectDecided(options_.clock->MonotonicMicros(), &decided);
    }
    if (!decided.empty()) durable_cv_.notify_all();
    for (auto& [done, result] : decided) done(result);
    if (stopping) return;
  }
}

}  // namespace gantry::ledger
