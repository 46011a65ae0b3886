#include "ledger/verify.h"

#include <map>
#include <pqxx/pqxx>

#include "absl/strings/str_cat.h"
#include "gantry/v1/ledger.pb.h"
#include "ledger/event_hash.h"
#include "ledger/ledger_key.h"

namespace gantry::ledger {
namespace {

constexpr int kPage = 5000;

// A BIGINT column as stored; NULL is 0. Negative values are kept (wrapped) here and
// reported by RowOutOfRange: the row was not written by a writer, and must not stop
// verification (found by a red team: one such row made every verify fail with INTERNAL).
uint64_t Counter(const pqxx::field& f) {
  return f.is_null() ? 0 : static_cast<uint64_t>(f.as<long long>());
}

std::string RowOutOfRange(const pqxx::row& row) {
  for (int column : {2, 3, 10}) {
    if (!row[column].is_null() && row[column].as<long long>() < 0) {
      return absl::StrCat("column ", row[column].name(), " is negative (",
                          row[column].as<long long>(), "): not written by a ledger writer");
    }
  }
  return "";
}

}  // namespace

v1::LedgerEvent LedgerEventFromRow(const pqxx::row& row) {
  v1::LedgerEvent e;
  e.set_event_id(row[0].as<std::string>());
  e.set_stream_id(row[1].as<std::string>());
  e.set_seq(Counter(row[2]));
  e.set_ts_unix_us(Counter(row[3]));
  e.set_type(row[4].as<std::string>());
  e.set_actor(row[5].as<std::string>());
  e.set_payload_json(row[6].as<std::string>());
  e.set_prev_sha256(row[7].as<std::string>());
  e.set_sha256(row[8].as<std::string>());
  if (!row[9].is_null()) e.set_writer_id(row[9].as<std::string>());
  if (!row[10].is_null()) e.set_writer_seq(Counter(row[10]));
  if (!row[11].is_null()) e.set_prev_mac(row[11].as<std::string>());
  if (!row[12].is_null()) e.set_mac(row[12].as<std::string>());
  return e;
}

const char kLedgerEventColumns[] =
    "event_id, stream_id, seq, ts_unix_us, type, actor, payload_json, prev_sha256, sha256, "
    "writer_id, writer_seq, prev_mac, mac";

namespace {

// Per stream: seq, prev_sha256, sha256 and each row's own mac.
void WalkStreams(pqxx::transaction_base& tx, const std::string& key, const std::string& stream_id,
                 VerifyReport* report) {
  std::string last_stream;
  long long last_seq = -1;
  std::string current;
  uint64_t expected_seq = 0;
  std::string prev_hash;
  bool current_broken = false;
  bool first = true;
  for (;;) {
    pqxx::result rows = tx.exec_params(
        absl::StrCat("SELECT ", kLedgerEventColumns, " FROM ledger_events "
                     "WHERE ($1 = '' OR stream_id = $1) AND (stream_id, seq) > ($2, $3) "
                     "ORDER BY stream_id, seq LIMIT $4"),
        stream_id, last_stream, last_seq, kPage);
    for (const auto& row : rows) {
      v1::LedgerEvent e = LedgerEventFromRow(row);
      if (first || e.stream_id() != current) {
        first = false;
        current = e.stream_id();
        expected_seq = 0;
        prev_hash.clear();
        current_broken = false;
        ++report->streams;
      }
      ++report->events;
      std::string problem = RowOutOfRange(row);
      const std::string recomputed = EventHash(e);
      if (!problem.empty()) {
      } else if (e.seq() != expected_seq) {
        problem = absl::StrCat("seq gap: expected ", expected_seq, ", found ", e.seq());
      } else if (e.prev_sha256() != prev_hash) {
        problem = absl::StrCat("prev_sha256 ", e.prev_sha256(),
                               " does not match the previous event's sha256 ", prev_hash);
      } else if (recomputed != e.sha256()) {
        problem = absl::StrCat("hash mismatch: stored ", e.sha256(), ", recomputed ", recomputed);
      } else if (e.mac().empty() || row[10].is_null()) {
        problem = "unkeyed event: no mac (written before the keyed chain, or its mac removed)";
      } else if (!MacEqual(EventMac(key, e), e.mac())) {
        problem = "mac mismatch: the event was not written with this ledger key as stored "
                  "(rewritten, or a different key)";
      }
      if (!problem.empty() && !current_broken) {
        report->broken.push_back({e.stream_id(), e.seq(), e.event_id(), problem});
        current_broken = true;
      }
      expected_seq = e.seq() + 1;
      prev_hash = e.sha256();
      last_stream = e.stream_id();
      last_seq = static_cast<long long>(e.seq());
    }
    if (rows.size() < static_cast<size_t>(kPage)) break;
  }
}

struct WriterHead {
  uint64_t events = 0;  // writer_seq of the last event + 1, as walked
};

// Per writer: writer_seq 0, 1, 2, ... and the prev_mac links. Reports a broken writer
// chain under the stream of the event where it breaks.
void WalkWriters(pqxx::transaction_base& tx, std::map<std::string, WriterHead>* heads,
                 std::map<std::pair<std::string, uint64_t>, std::string>* macs_at,
                 VerifyReport* report) {
  std::string last_writer;
  long long last_seq = -1;
  std::string current;
  uint64_t expected = 0;
  std::string prev_mac;
  bool broken = false;
  bool first = true;
  for (;;) {
    pqxx::result rows = tx.exec_params(
        absl::StrCat("SELECT ", kLedgerEventColumns, " FROM ledger_events WHERE writer_id IS NOT NULL "
                     "AND (writer_id, writer_seq) > ($1, $2) ORDER BY writer_id, writer_seq "
                     "LIMIT $3"),
        last_writer, last_seq, kPage);
    for (const auto& row : rows) {
      v1::LedgerEvent e = LedgerEventFromRow(row);
      if (first || e.writer_id() != current) {
        first = false;
        current = e.writer_id();
        expected = 0;
        prev_mac.clear();
        broken = false;
        ++report->writers;
      }
      std::string problem;
      if (e.writer_seq() != expected) {
        problem = absl::StrCat("writer ", current, " chain gap: expected writer_seq ", expected,
                               ", found ", e.writer_seq(), " (events deleted)");
      } else if (e.prev_mac() != prev_mac) {
        problem = absl::StrCat("writer ", current, " chain: prev_mac does not match the mac of ",
                               "writer_seq ", expected == 0 ? 0 : expected - 1);
      }
      if (!problem.empty() && !broken) {
        report->broken.push_back({e.stream_id(), e.seq(), e.event_id(), problem});
        broken = true;
      }
      (*heads)[current].events = e.writer_seq() + 1;
      auto wanted = macs_at->find({current, e.writer_seq()});
      if (wanted != macs_at->end()) wanted->second = e.mac();
      expected = e.writer_seq() + 1;
      prev_mac = e.mac();
      last_writer = e.writer_id();
      last_seq = static_cast<long long>(e.writer_seq());
    }
    if (rows.size() < static_cast<size_t>(kPage)) break;
  }
}

}  // namespace

absl::StatusOr<VerifyReport> VerifyLedger(const VerifyOptions& options) {
  auto key = ReadKeyFile(options.key_file.empty() ? DefaultKeyFile() : options.key_file);
  if (!key.ok()) return key.status();
  // Checkpoints first: a forged one is an error of its own.
  std::map<std::string, Checkpoint> checkpoints;  // writer id -> the furthest
  const bool whole = options.stream_id.empty() && !options.streams_only;
  if (whole) {
    for (const std::string& dir : options.checkpoint_dirs) {
      for (const std::string& path : FindCheckpointFiles(dir)) {
        auto c = ReadCheckpoint(path, *key);
        if (!c.ok()) return c.status();
        auto& slot = checkpoints[c->writer_id];
        if (c->events >= slot.events) slot = *c;
      }
    }
  }
  VerifyReport report;
  report.checkpoints = checkpoints.size();
  if (whole) {
    // Events the database refused are evidence outside the ledger: the ledger is not
    // whole while any are kept (the writer stopped acknowledging when it kept them).
    for (const std::string& dir : options.checkpoint_dirs) {
      for (const std::string& path : FindDeadLetterFiles(dir)) {
        report.broken.push_back(
            {"", 0, "",
             absl::StrCat("events the database refused are kept in ", path,
                          ", not in the ledger (docs/ledger.md, \"Durability\")")});
      }
    }
  }
  try {
    pqxx::connection connection(options.database_url);
    pqxx::read_transaction tx(connection);
    WalkStreams(tx, *key, options.stream_id, &report);
    if (whole) {
      std::map<std::string, WriterHead> heads;
      std::map<std::pair<std::string, uint64_t>, std::string> macs_at;
      for (const auto& [writer, c] : checkpoints) {
        if (c.events > 0) macs_at[{writer, c.events - 1}] = "";
      }
      WalkWriters(tx, &heads, &macs_at, &report);
      for (const auto& [writer, c] : checkpoints) {
        const uint64_t have = heads.count(writer) ? heads[writer].events : 0;
        if (have < c.events) {
          report.broken.push_back(
              {"", c.events - 1, "",
               absl::StrCat("writer ", writer, " truncated: its checkpoint records ", c.events,
                            " committed events, the ledger holds ", have)});
        } else if (c.events > 0 && !MacEqual(macs_at[{writer, c.events - 1}], c.head_mac)) {
          report.broken.push_back(
              {"", c.events - 1, "",
               absl::StrCat("writer ", writer, " rewritten: the mac at writer_seq ",
                            c.events - 1, " is not the checkpointed head")});
        }
      }
      for (const auto& [writer, head] : heads) {
        if (!checkpoints.count(writer)) {
          report.broken.push_back(
              {"", head.events - 1, "",
               absl::StrCat("writer ", writer, " has no checkpoint in the checkpoint "
                            "directories: the end of its chain cannot be checked")});
        }
      }
    }
  } catch (const pqxx::undefined_table&) {
    return absl::FailedPreconditionError(
        "this database holds no ledger (no ledger_events table; `gantry ledger setup` "
        "creates it)");
  } catch (const pqxx::undefined_column&) {
    return absl::FailedPreconditionError(
        "this ledger's schema is older than the keyed chain: run `gantry ledger setup`");
  } catch (const pqxx::broken_connection& e) {
    return absl::UnavailableError(absl::StrCat("ledger database unreachable: ", e.what()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("ledger verify: ", e.what()));
  }
  return report;
}

absl::StatusOr<VerifyReport> VerifyLedger(const std::string& database_url,
                                          const std::string& stream_id) {
  VerifyOptions options;
  options.database_url = database_url;
  options.stream_id = stream_id;
  options.streams_only = true;
  return VerifyLedger(options);
}

}  // namespace gantry::ledger
