// Benchmark: sustained ledger events per second with hashing, through LedgerWriter into
// a real Postgres, side by side in one run with the peer: the same rows written by
// plain batched INSERTs with no canonicalisation, no hashing and no chain (what a
// naive audit log would do). Prints both rates and the ratio.
//
//   bazel run -c opt //ledger:ledger_bench -- --db postgresql://postgres@127.0.0.1:PORT/postgres [--events N]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <pqxx/pqxx>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/ids.h"
#include "common/log.h"
#include "ledger/ledger_key.h"
#include "ledger/schema.h"
#include "ledger/writer.h"

namespace {

using Clock = std::chrono::steady_clock;

std::string CreateDatabase(const std::string& server) {
  std::string name = gantry::NewId("bench");
  pqxx::connection admin(server);
  pqxx::nontransaction tx(admin);
  tx.exec0("CREATE DATABASE " + name);
  return server.substr(0, server.rfind('/') + 1) + name;
}

std::string Payload(int i) {
  return absl::StrCat(R"({"gen_ai.request.model":"qwen3-demo","gen_ai.usage.input_tokens":)", 1000 + i,
                      R"(,"gen_ai.usage.output_tokens":)", i % 512,
                      R"(,"gantry.policy.rule_id":"grants[2].models.qwen3","gantry.decision":"allow"})");
}

double RunWriter(const std::string& url, int events, int streams) {
  gantry::ledger::WriterOptions options;
  {
    pqxx::connection owner(url);  // the owner sets up; the writer logs in as its role
    if (!gantry::ledger::SetupLedger(owner, "").ok()) std::exit(1);
  }
  options.database_url = url;
  options.database_url.replace(options.database_url.find("postgres@"), 8,
                               gantry::ledger::kWriterRole);
  options.spool_dir = absl::StrCat("/tmp/gantry-bench-spool-", gantry::NewId("d"));
  options.key_file = options.spool_dir + ".key";
  if (!gantry::ledger::GenerateKeyFile(options.key_file).ok()) std::exit(1);
  auto writer = gantry::ledger::LedgerWriter::Start(options);
  if (!writer.ok()) {
    std::fprintf(stderr, "%s\n", writer.status().ToString().c_str());
    std::exit(1);
  }
  auto start = Clock::now();
  for (int i = 0; i < events; ++i) {
    auto e = (*writer)->Append({absl::StrCat("req_", i % streams), "admission.decided", "router", Payload(i)});
    if (!e.ok()) std::exit(1);
  }
  if (!(*writer)->Flush(600000).ok()) std::exit(1);
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if ((*writer)->GetStats().inserted != static_cast<uint64_t>(events)) {
    std::fprintf(stderr, "writer spooled instead of inserting; is Postgres up?\n");
    std::exit(1);
  }
  return events / seconds;
}

double RunPlainInserts(const std::string& url, int events, int streams) {
  pqxx::connection c(url);
  {
    pqxx::work tx(c);
    tx.exec0("CREATE TABLE plain_events (id bigserial PRIMARY KEY, event_id text UNIQUE, "
             "stream_id text, seq bigint, ts_unix_us bigint, type text, actor text, "
             "payload_json text, prev_sha256 text, sha256 text, UNIQUE (stream_id, seq))");
    tx.commit();
  }
  const std::string hash(64, '0');
  auto start = Clock::now();
  constexpr int kBatch = 1000;
  for (int base = 0; base < events; base += kBatch) {
    pqxx::work tx(c);
    std::string sql = "INSERT INTO plain_events (event_id, stream_id, seq, ts_unix_us, type, actor, "
                      "payload_json, prev_sha256, sha256) VALUES ";
    for (int i = base; i < std::min(events, base + kBatch); ++i) {
      absl::StrAppend(&sql, i == base ? "" : ",", "(", tx.quote(absl::StrCat("evt_", i)), ",",
                      tx.quote(absl::StrCat("req_", i % streams)), ",", i / streams, ",", i, ",",
                      "'admission.decided','router',", tx.quote(Payload(i)), ",", tx.quote(hash), ",",
                      tx.quote(hash), ")");
    }
    tx.exec0(sql);
    tx.commit();
  }
  return events / std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string server;
  int events = 100000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--db")) server = argv[i + 1];
    if (!std::strcmp(argv[i], "--events")) events = std::atoi(argv[i + 1]);
  }
  if (server.empty()) {
    std::fprintf(stderr, "usage: ledger_bench --db URL [--events N]\n");
    return 2;
  }
  gantry::InitLogging("ledger_bench", gantry::LogLevel::kError);
  const int streams = 100;
  // Alternate the two sides so that neither gets a warmer machine.
  double ours = 0, peer = 0;
  for (int round = 0; round < 2; ++round) {
    ours = std::max(ours, RunWriter(CreateDatabase(server), events, streams));
    peer = std::max(peer, RunPlainInserts(CreateDatabase(server), events, streams));
  }
  std::printf("ledger writer (canonical JSON, SHA-256 chain, batched): %.0f events/s\n", ours);
  std::printf("peer: plain batched INSERT, no hashing:                 %.0f events/s\n", peer);
  std::printf("ratio ours/peer: %.2f   goal: >= 20000 events/s -> %s\n", ours / peer,
              ours >= 20000 ? "met" : "NOT met");
  return 0;
}
