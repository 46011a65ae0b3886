#include "ledger/ledger_commands.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <pqxx/pqxx>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/json.h"
#include "common/log.h"
#include "ledger/ledger_key.h"
#include "ledger/schema.h"
#include "ledger/verify.h"
#include "ledger/writer.h"

namespace gantry::ledger {
namespace {

constexpr char kUsage[] =
    "Usage: gantry ledger <setup|verify|export|tail|append> [options]\n"
    "\n"
    "  setup --db OWNER_URL [--key-file F] [--writer-password-file F]\n"
    "                                   as the owner: apply the migrations, make the\n"
    "                                   writer role a login, create the ledger key (mode\n"
    "                                   0600) unless it exists and, with a password file,\n"
    "                                   give the writer a new password kept there (a\n"
    "                                   libpq passfile); prints the writer's URL\n"
    "  verify [--stream ID] [--checkpoints DIR[:DIR...]]\n"
    "                                   walk every hash chain and keyed chain (or one\n"
    "                                   stream) and cross-check the writers' checkpoints\n"
    "                                   (default DIR: $GANTRY_HOME/spool); report the first\n"
    "                                   broken link of each broken stream; exit 1 if any\n"
    "  export --task ID [-o FILE]       write the evidence of one task or request stream as\n"
    "                                   one JSON file: chain check, events, referenced\n"
    "                                   bundle identities and policy versions\n"
    "  tail [--type PREFIX] [--from-start] [--limit N]\n"
    "                                   follow events live, one JSON object per line\n"
    "  append --stream ID --type T --actor A [--payload JSON] [--spool-dir DIR]\n"
    "                                   append one event to a stream, continuing its chain\n"
    "                                   (needs Postgres to read the stream's tail)\n"
    "\n"
    "Common options: --db URL (libpq URL). Default: $GANTRY_LEDGER_URL, else the local\n"
    "cluster of deploy/up: postgresql://postgres@/postgres?host=$GANTRY_HOME/pg (append:\n"
    "the writer role, postgresql://gantry_ledger_writer@/postgres?host=$GANTRY_HOME/pg).\n"
    "--key-file F: the ledger key. Default: $GANTRY_LEDGER_KEY, else $GANTRY_HOME/ledger.key\n"
    "Exit status: 0 success, 1 failure (or a broken chain), 2 usage error.\n";

std::string GantryHome() {
  if (const char* home = std::getenv("GANTRY_HOME")) return home;
  const char* xdg = std::getenv("XDG_DATA_HOME");
  const char* user_home = std::getenv("HOME");
  return absl::StrCat(xdg ? xdg : absl::StrCat(user_home ? user_home : "", "/.local/share"),
                      "/gantry");
}

std::string DefaultUrl() {
  if (const char* url = std::getenv("GANTRY_LEDGER_URL")) return url;
  return absl::StrCat("postgresql://postgres@/postgres?host=", GantryHome(), "/pg");
}

std::string DefaultWriterUrl() {
  if (const char* url = std::getenv("GANTRY_LEDGER_WRITER_URL")) return url;
  return absl::StrCat("postgresql://", kWriterRole, "@/postgres?host=", GantryHome(), "/pg");
}

// `url` with its user (and any password) replaced by the writer role, and, when
// `passfile` is given, a passfile parameter naming it.
std::string WriterUrlOf(const std::string& url, const std::string& passfile) {
  std::string out = url;
  const size_t scheme = out.find("://");
  if (scheme != std::string::npos) {
    const size_t start = scheme + 3;
    const size_t end = out.find_first_of("/?", start);
    const size_t at = out.rfind('@', end == std::string::npos ? out.size() : end);
    const std::string rest = (at != std::string::npos && at >= start) ? out.substr(at + 1)
                                                                        : out.substr(start);
    out = absl::StrCat(out.substr(0, start), kWriterRole, "@", rest);
  }
  if (!passfile.empty()) {
    absl::StrAppend(&out, out.find('?') == std::string::npos ? "?" : "&", "passfile=", passfile);
  }
  return out;
}

std::string KeyFileOf(const std::map<std::string, std::string>& values) {
  auto it = values.find("--key-file");
  return it == values.end() ? DefaultKeyFile() : it->second;
}

// Options of the form --name VALUE; flags listed in `flags` take no value.
struct Args {
  std::map<std::string, std::string> values;
  std::string error;
};

Args ParseArgs(const std::vector<std::string>& args, size_t from,
               const std::set<std::string>& valued, const std::set<std::string>& flags) {
  Args out;
  for (size_t i = from; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (flags.count(a)) {
      out.values[a] = "1";
    } else if (valued.count(a)) {
      if (i + 1 >= args.size()) {
        out.error = absl::StrCat(a, " needs a value");
        return out;
      }
      out.values[a] = args[++i];
    } else {
      out.error = absl::StrCat("unknown option '", a, "'");
      return out;
    }
  }
  return out;
}

std::string Get(const Args& args, const std::string& name, const std::string& fallback = "") {
  auto it = args.values.find(name);
  return it == args.values.end() ? fallback : it->second;
}

json::Value EventJson(const pqxx::row& row) {
  json::Value e = json::Value::EmptyObject();
  e.Set("id", json::Value::Int(row["id"].as<long long>()));
  e.Set("event_id", json::Value::String(row["event_id"].as<std::string>()));
  e.Set("stream_id", json::Value::String(row["stream_id"].as<std::string>()));
  e.Set("seq", json::Value::Int(row["seq"].as<long long>()));
  e.Set("ts_unix_us", json::Value::Int(row["ts_unix_us"].as<long long>()));
  e.Set("type", json::Value::String(row["type"].as<std::string>()));
  e.Set("actor", json::Value::String(row["actor"].as<std::string>()));
  auto payload = json::Parse(row["payload_json"].as<std::string>());
  e.Set("payload", payload.ok() ? *payload : json::Value::String(row["payload_json"].as<std::string>()));
  e.Set("prev_sha256", json::Value::String(row["prev_sha256"].as<std::string>()));
  e.Set("sha256", json::Value::String(row["sha256"].as<std::string>()));
  return e;
}

constexpr char kEventColumns[] =
    "id, event_id, stream_id, seq, ts_unix_us, type, actor, payload_json, prev_sha256, sha256";

int RunSetup(const Args& args) {
  const std::string url = Get(args, "--db", DefaultUrl());
  const std::string key_file = KeyFileOf(args.values);
  const std::string passfile = Get(args, "--writer-password-file");
  std::string password;
  if (!passfile.empty()) {
    unsigned char bytes[24];
    if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
      std::fprintf(stderr, "gantry ledger setup: RAND_bytes failed\n");
      return 1;
    }
    password = absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(bytes), sizeof(bytes)));
  }
  try {
    pqxx::connection owner(url);
    absl::Status done = SetupLedger(owner, password);
    if (!done.ok()) {
      std::fprintf(stderr, "gantry ledger setup: %s\n", done.ToString().c_str());
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gantry ledger setup: %s\n", e.what());
    return 1;
  }
  if (!passfile.empty()) {
    // A libpq password file: host:port:database:user:password, mode 0600.
    const std::string line = absl::StrCat("*:*:*:", kWriterRole, ":", password, "\n");
    const std::string tmp = passfile + ".tmp";
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    bool ok = fd >= 0 && ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) &&
              ::fsync(fd) == 0;
    if (fd >= 0) ::close(fd);
    if (!ok || ::rename(tmp.c_str(), passfile.c_str()) != 0) {
      std::fprintf(stderr, "gantry ledger setup: cannot write %s\n", passfile.c_str());
      return 1;
    }
  }
  absl::Status key = GenerateKeyFile(key_file);
  if (!key.ok() && !absl::IsAlreadyExists(key)) {
    std::fprintf(stderr, "gantry ledger setup: key: %s\n", key.ToString().c_str());
    return 1;
  }
  auto readable = ReadKeyFile(key_file);  // an existing key must be a good one
  if (!readable.ok()) {
    std::fprintf(stderr, "gantry ledger setup: %s\n", readable.status().ToString().c_str());
    return 1;
  }
  std::printf("%s\n", WriterUrlOf(url, passfile).c_str());
  return 0;
}

int RunVerify(const Args& args) {
  VerifyOptions options;
  options.database_url = Get(args, "--db", DefaultUrl());
  options.stream_id = Get(args, "--stream");
  options.key_file = KeyFileOf(args.values);
  options.checkpoint_dirs =
      absl::StrSplit(Get(args, "--checkpoints", absl::StrCat(GantryHome(), "/spool")), ':',
                     absl::SkipEmpty());
  auto report = VerifyLedger(options);
  if (!report.ok()) {
    std::fprintf(stderr, "gantry ledger verify: %s\n", report.status().ToString().c_str());
    return 1;
  }
  for (const BrokenLink& link : report->broken) {
    std::printf("BROKEN stream %s seq %llu (event %s): %s\n", link.stream_id.c_str(),
                static_cast<unsigned long long>(link.seq), link.event_id.c_str(),
                link.problem.c_str());
  }
  std::printf("%llu streams, %llu events, %zu broken",
              static_cast<unsigned long long>(report->streams),
              static_cast<unsigned long long>(report->events), report->broken.size());
  if (options.stream_id.empty()) {
    std::printf(" (%llu writers, %llu checkpoints)",
                static_cast<unsigned long long>(report->writers),
                static_cast<unsigned long long>(report->checkpoints));
  }
  std::printf("\n");
  return report->ok() ? 0 : 1;
}

// Collects string values of `key` anywhere inside `value`.
void CollectStrings(const json::Value& value, absl::string_view key, std::set<std::string>* out) {
  if (value.is_object()) {
    for (const auto& [k, v] : value.members()) {
      if (k == key && v.is_string()) out->insert(v.as_string());
      CollectStrings(v, key, out);
    }
  } else if (value.is_array()) {
    for (const auto& v : value.items()) CollectStrings(v, key, out);
  }
}

int RunExport(const Args& args) {
  const std::string stream = Get(args, "--task");
  if (stream.empty()) {
    std::fprintf(stderr, "gantry ledger export: --task ID is required\n");
    return 2;
  }
  const std::string url = Get(args, "--db", DefaultUrl());
  json::Value doc = json::Value::EmptyObject();
  doc.Set("format", json::Value::String("gantry.evidence.v1"));
  doc.Set("stream_id", json::Value::String(stream));
  try {
    VerifyOptions verify;
    verify.database_url = url;
    verify.stream_id = stream;
    verify.key_file = KeyFileOf(args.values);
    auto report = VerifyLedger(verify);
    if (!report.ok()) {
      std::fprintf(stderr, "gantry ledger export: %s\n", report.status().ToString().c_str());
      return 1;
    }
    json::Value chain = json::Value::EmptyObject();
    chain.Set("verified", json::Value::Bool(report->ok()));
    chain.Set("events", json::Value::Int(static_cast<int64_t>(report->events)));
    if (!report->ok()) chain.Set("first_broken_link", json::Value::String(report->broken[0].problem));
    doc.Set("chain", chain);

    pqxx::connection c(url);
    pqxx::read_transaction tx(c);
    pqxx::result rows = tx.exec_params(
        absl::StrCat("SELECT ", kEventColumns, " FROM ledger_events WHERE stream_id = $1 ORDER BY seq"),
        stream);
    if (rows.empty()) {
      std::fprintf(stderr, "gantry ledger export: no events for %s\n", stream.c_str());
      return 1;
    }
    json::Value events = json::Value::EmptyArray();
    std::set<std::string> bundles, policies;
    for (const auto& row : rows) {
      json::Value e = EventJson(row);
      CollectStrings(*e.Find("payload"), "gantry.bundle.identity_sha256", &bundles);
      CollectStrings(*e.Find("payload"), "gantry.policy.sha256", &policies);
      events.Append(std::move(e));
    }
    json::Value identities = json::Value::EmptyArray();
    for (const std::string& id : bundles) {
      pqxx::result r = tx.exec_params(
          "SELECT model, architecture, weights_sha256, tokenizer_sha256, chat_template_sha256, "
          "tool_protocol, context_length FROM ledger_bundle_identities WHERE identity_sha256 = $1",
          id);
      json::Value b = json::Value::EmptyObject();
      b.Set("identity_sha256", json::Value::String(id));
      if (!r.empty()) {
        for (const char* col : {"model", "architecture", "weights_sha256", "tokenizer_sha256",
                                "chat_template_sha256", "tool_protocol"}) {
          b.Set(col, json::Value::String(r[0][col].as<std::string>()));
        }
        b.Set("context_length", json::Value::Int(r[0]["context_length"].as<long long>()));
      } else {
        b.Set("recorded", json::Value::Bool(false));
      }
      identities.Append(std::move(b));
    }
    json::Value policy_list = json::Value::EmptyArray();
    for (const std::string& p : policies) policy_list.Append(json::Value::String(p));
    doc.Set("bundle_identities", identities);
    doc.Set("policy_versions", policy_list);
    doc.Set("events", events);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gantry ledger export: %s\n", e.what());
    return 1;
  }
  json::DumpOptions pretty;
  pretty.indent = 2;
  std::string text = json::Dump(doc, pretty) + "\n";
  const std::string out = Get(args, "-o");
  FILE* f = out.empty() ? stdout : std::fopen(out.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "gantry ledger export: cannot write %s\n", out.c_str());
    return 1;
  }
  std::fwrite(text.data(), 1, text.size(), f);
  if (f != stdout) std::fclose(f);
  return 0;
}

int RunTail(const Args& args) {
  const std::string prefix = Get(args, "--type");
  const long long limit = std::atoll(Get(args, "--limit", "0").c_str());
  long long printed = 0;
  try {
    pqxx::connection c(Get(args, "--db", DefaultUrl()));
    long long last = 0;
    if (!args.values.count("--from-start")) {
      pqxx::read_transaction tx(c);
      last = tx.exec1("SELECT coalesce(max(id), 0) FROM ledger_events")[0].as<long long>();
    }
    for (;;) {
      {
        pqxx::read_transaction tx(c);
        pqxx::result rows = tx.exec_params(
            absl::StrCat("SELECT ", kEventColumns,
                         " FROM ledger_events WHERE id > $1 AND type LIKE $2 ORDER BY id LIMIT 1000"),
            last, absl::StrCat(prefix, "%"));
        for (const auto& row : rows) {
          last = row["id"].as<long long>();
          std::printf("%s\n", json::DumpCompact(EventJson(row)).c_str());
          if (limit > 0 && ++printed >= limit) return 0;
        }
      }
      std::fflush(stdout);
      ::usleep(200 * 1000);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gantry ledger tail: %s\n", e.what());
    return 1;
  }
}

int RunAppend(const Args& args) {
  EventInput input{Get(args, "--stream"), Get(args, "--type"), Get(args, "--actor"),
                   Get(args, "--payload", "{}")};
  WriterOptions options;
  options.database_url = Get(args, "--db", DefaultWriterUrl());
  options.spool_dir = Get(args, "--spool-dir", absl::StrCat(GantryHome(), "/spool"));
  options.key_file = KeyFileOf(args.values);
  InitLogging("gantry-ledger", LogLevel::kError);
  auto writer = LedgerWriter::Start(options);
  if (!writer.ok()) {
    std::fprintf(stderr, "gantry ledger append: %s\n", writer.status().ToString().c_str());
    return 1;
  }
  // The stream may already hold events: continue its chain, never fork it.
  absl::Status resumed = (*writer)->ResumeStream(input.stream_id);
  if (!resumed.ok()) {
    std::fprintf(stderr, "gantry ledger append: %s\n", resumed.ToString().c_str());
    return 1;
  }
  auto event = (*writer)->Append(std::move(input));
  if (!event.ok()) {
    std::fprintf(stderr, "gantry ledger append: %s\n", event.status().ToString().c_str());
    return 2;
  }
  absl::Status flushed = (*writer)->Flush(30000);
  if (!flushed.ok()) {
    std::fprintf(stderr, "gantry ledger append: %s\n", flushed.ToString().c_str());
    return 1;
  }
  WriterStats stats = (*writer)->GetStats();
  std::printf("%s seq %llu %s%s\n", event->event_id().c_str(),
              static_cast<unsigned long long>(event->seq()), event->sha256().c_str(),
              stats.spooling ? " (spooled: Postgres unreachable)" : "");
  return 0;
}

int RunLedger(const std::vector<std::string>& argv) {
  if (argv.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string& verb = argv[0];
  Args args;
  if (verb == "setup") {
    args = ParseArgs(argv, 1, {"--db", "--key-file", "--writer-password-file"}, {});
  } else if (verb == "verify") {
    args = ParseArgs(argv, 1, {"--db", "--stream", "--key-file", "--checkpoints"}, {});
  } else if (verb == "export") {
    args = ParseArgs(argv, 1, {"--db", "--task", "-o", "--key-file"}, {});
  } else if (verb == "tail") {
    args = ParseArgs(argv, 1, {"--db", "--type", "--limit"}, {"--from-start"});
  } else if (verb == "append") {
    args = ParseArgs(argv, 1, {"--db", "--stream", "--type", "--actor", "--payload", "--spool-dir",
                               "--key-file"}, {});
  } else {
    std::fprintf(stderr, "gantry ledger: unknown verb '%s'\n%s", verb.c_str(), kUsage);
    return 2;
  }
  if (!args.error.empty()) {
    std::fprintf(stderr, "gantry ledger %s: %s\n", verb.c_str(), args.error.c_str());
    return 2;
  }
  if (verb == "setup") return RunSetup(args);
  if (verb == "verify") return RunVerify(args);
  if (verb == "export") return RunExport(args);
  if (verb == "tail") return RunTail(args);
  return RunAppend(args);
}

}  // namespace

const Subcommand kLedgerCommand = {
    "ledger", "verify, export and follow the hash-chained evidence ledger", kUsage, &RunLedger};

}  // namespace gantry::ledger
