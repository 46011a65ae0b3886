#include "harness-svc/task_commands.h"

#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <pqxx/pqxx>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/curve_keys.h"
#include "common/ids.h"
#include "common/log.h"
#include "common/sha256.h"
#include "common/status.h"
#include "harness-svc/agent_loop.h"
#include "harness-svc/manifest.h"
#include "harness-svc/router_client.h"
#include "harness-svc/sandbox_client.h"
#include "ledger/verify.h"
#include "ledger/writer.h"

namespace gantry::harness {
namespace {

using json::Value;

std::string GantryHome() {
  if (const char* home = std::getenv("GANTRY_HOME")) return home;
  const char* xdg = std::getenv("XDG_DATA_HOME");
  const char* user_home = std::getenv("HOME");
  return absl::StrCat(xdg ? xdg : absl::StrCat(user_home ? user_home : "", "/.local/share"), "/gantry");
}

std::string DefaultLedgerUrl() {
  if (const char* url = std::getenv("GANTRY_LEDGER_URL")) return url;
  // The writer role's login (docs/ledger.md, "Roles"): the owner never writes events.
  return absl::StrCat("postgresql://gantry_ledger_writer@/postgres?host=", GantryHome(), "/pg");
}

std::string Text(const Value& p, const char* key) {
  const Value* v = p.Find(key);
  if (v == nullptr) return "";
  if (v->is_string()) return v->as_string();
  return json::DumpCompact(*v);
}

// " ttft=12.3ms" when the turn recorded its time to first token, else "".
std::string FirstTokenText(const Value& p) {
  const Value* v = p.Find("gantry.timings.first_token_us");
  if (v == nullptr || !v->as_int64()) return "";
  return absl::StrFormat(" ttft=%.1fms", static_cast<double>(*v->as_int64()) / 1000.0);
}

std::string OneLine(std::string s, size_t max) {
  for (char& c : s) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  if (s.size() > max) s = s.substr(0, max) + "...";
  return s;
}

std::string Clock() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  tm t;
  localtime_r(&ts.tv_sec, &t);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%02d:%02d:%02d.%03ld", t.tm_hour, t.tm_min, t.tm_sec, ts.tv_nsec / 1000000);
  return buf;
}

// Records into the ledger (appended and flushed: durable before anything else
// happens), then prints the progress line.
// The task index row (ledger_tasks); a convenience for queries, the evidence is the
// event stream, so an unreachable Postgres here only warns (the writer spools).
void IndexTask(const std::string& url, const std::string& task_id, const std::string& parent,
               const std::string& principal, const std::string& goal) {
  try {
    pqxx::connection c(url);
    pqxx::work tx(c);
    tx.exec_params(
        "INSERT INTO ledger_tasks (task_id, parent_task_id, principal, goal) VALUES ($1, NULLIF($2, ''), $3, $4) "
        "ON CONFLICT (task_id) DO NOTHING",
        task_id, parent, principal, goal);
    tx.commit();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gantry task run: warning: task index not written: %s\n", OneLine(e.what(), 200).c_str());
  }
}

class LedgerSink : public EventSink {
 public:
  LedgerSink(ledger::LedgerWriter* writer, std::string url, std::string stream, bool quiet, std::string indent = "")
      : writer_(writer), url_(std::move(url)), stream_(std::move(stream)), quiet_(quiet), indent_(std::move(indent)) {}
  absl::StatusOr<std::unique_ptr<EventSink>> ForChildTask(const std::string& child_task_id,
                                                          const std::string& goal) override {
    IndexTask(url_, child_task_id, stream_, "harness", goal);
    return std::unique_ptr<EventSink>(
        new LedgerSink(writer_, url_, child_task_id, quiet_, absl::StrCat(indent_, "  child ")));
  }
  absl::Status Record(const std::string& type, const Value& payload) override {
    ledger::EventInput in;
    in.stream_id = stream_;
    in.type = type;
    in.actor = "harness";
    in.payload_json = json::DumpCompact(payload);
    auto event = writer_->Append(std::move(in));
    if (!event.ok()) return event.status();
    GANTRY_RETURN_IF_ERROR(writer_->Flush(30000));
    if (!quiet_) {
      std::printf("%s  %s%3llu  %-16s %s\n", Clock().c_str(), indent_.c_str(),
                  static_cast<unsigned long long>(event->seq()), type.c_str(),
                  SummarizeEvent(type, payload).c_str());
      std::fflush(stdout);
    }
    return absl::OkStatus();
  }

 private:
  ledger::LedgerWriter* writer_;
  std::string url_;
  std::string stream_;
  bool quiet_;
  std::string indent_;
};

struct Flags {
  std::map<std::string, std::string> values;
  std::vector<std::string> positional;
  std::string error;
};

Flags ParseFlags(const std::vector<std::string>& args, size_t from, const std::set<std::string>& valued,
                 const std::set<std::string>& bare) {
  Flags f;
  for (size_t i = from; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (bare.count(a)) {
      f.values[a] = "1";
    } else if (valued.count(a)) {
      if (i + 1 >= args.size()) {
        f.error = absl::StrCat(a, " needs a value");
        return f;
      }
      f.values[a] = args[++i];
    } else if (!a.empty() && a[0] == '-') {
      f.error = absl::StrCat("unknown option '", a, "'");
      return f;
    } else {
      f.positional.push_back(a);
    }
  }
  return f;
}

std::string Get(const Flags& f, const std::string& key, const std::string& fallback) {
  auto it = f.values.find(key);
  return it == f.values.end() ? fallback : it->second;
}

int Usage(const std::string& error) {
  std::fprintf(stderr, "gantry task: %s\n%s", error.c_str(), kTaskCommand.usage);
  return 2;
}

int RunTask(const Flags& flags) {
  if (flags.positional.size() != 1) return Usage("run needs exactly one manifest FILE");
  const std::string file = flags.positional[0];
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "gantry task run: cannot read %s\n", file.c_str());
    return 1;
  }
  std::stringstream text;
  text << in.rdbuf();
  auto manifest = ParseManifest(text.str(), file);
  if (!manifest.ok()) {
    std::fprintf(stderr, "gantry task run: %s\n", std::string(manifest.status().message()).c_str());
    return 1;
  }
  const size_t slash = file.rfind('/');
  auto workspace = ResolveWorkspace(manifest->workspace, slash == std::string::npos ? "." : file.substr(0, slash));
  if (!workspace.ok()) {
    std::fprintf(stderr, "gantry task run: %s: %s\n", file.c_str(),
                 std::string(workspace.status().message()).c_str());
    return 1;
  }
  std::string key = Get(flags, "--key", "");
  if (key.empty()) {
    const char* env = std::getenv("GANTRY_HARNESS_KEY");
    key = env ? env : "";
  }
  if (key.empty()) return Usage("the harness's API key is needed: --key KEY or $GANTRY_HARNESS_KEY");

  ledger::WriterOptions wo;
  wo.database_url = Get(flags, "--ledger", DefaultLedgerUrl());
  wo.spool_dir = Get(flags, "--spool-dir", absl::StrCat(GantryHome(), "/spool/harness"));
  auto writer = ledger::LedgerWriter::Start(wo);
  if (!writer.ok()) {
    std::fprintf(stderr, "gantry task run: ledger: %s\n", writer.status().ToString().c_str());
    return 1;
  }
  LoopOptions lo;
  lo.task_id = NewId("task");
  lo.workspace = *workspace;
  lo.manifest_sha256 = Sha256Hex(text.str());
  IndexTask(wo.database_url, lo.task_id, "", lo.principal, manifest->goal);
  const bool quiet = flags.values.count("--quiet") > 0;
  std::printf("task %s: %s\n", lo.task_id.c_str(), OneLine(manifest->goal, 100).c_str());
  std::fflush(stdout);
  RouterClient router(Get(flags, "--router", "http://127.0.0.1:8080"), key);
  const std::string sandbox_endpoint = Get(flags, "--sandbox", kDefaultSandboxEndpoint);
  absl::optional<CurveClientKeys> sandbox_keys;
  const bool tcp = absl::StartsWith(sandbox_endpoint, "tcp://");
  const bool keyed = flags.values.count("--sandbox-key") || flags.values.count("--sandbox-server-key");
  if (tcp != keyed) {
    return Usage(tcp ? "a tcp:// sandbox needs CURVE: --sandbox-key FILE and --sandbox-server-key FILE"
                     : "--sandbox-key and --sandbox-server-key are for a tcp:// sandbox");
  }
  if (tcp) {
    auto keys = ReadCurveClientKeys(Get(flags, "--sandbox-key", ""), Get(flags, "--sandbox-server-key", ""));
    if (!keys.ok()) {
      std::fprintf(stderr, "gantry task run: %s\n", keys.status().ToString().c_str());
      return 1;
    }
    sandbox_keys = *std::move(keys);
  }
  SandboxClient sandbox(sandbox_endpoint, std::move(sandbox_keys));
  LedgerSink sink(writer->get(), wo.database_url, lo.task_id, quiet);
  AgentLoop loop(*manifest, lo, &router, &sandbox, &sink);
  auto outcome = loop.Run();
  if (!outcome.ok()) {
    std::fprintf(stderr, "gantry task run: %s: the ledger could not record an event, the task stopped: %s\n",
                 lo.task_id.c_str(), outcome.status().ToString().c_str());
    return 1;
  }
  std::printf("task %s: %s (%s)\n", lo.task_id.c_str(), outcome->status.c_str(), outcome->reason.c_str());
  std::printf("tokens %lld of %lld, tool calls %lld of %lld, turns %lld of %lld, denials %lld\n",
              static_cast<long long>(outcome->model_tokens),
              static_cast<long long>(manifest->budget.max_model_tokens),
              static_cast<long long>(outcome->tool_calls),
              static_cast<long long>(manifest->budget.max_tool_calls),
              static_cast<long long>(outcome->turns), static_cast<long long>(manifest->budget.max_turns),
              static_cast<long long>(outcome->denials));
  for (const auto& c : outcome->acceptance) {
    std::printf("acceptance %s %s: %s\n", c.passed ? "PASS" : "FAIL", c.check.c_str(), c.detail.c_str());
  }
  if (!outcome->answer.empty()) std::printf("answer:\n%s\n", outcome->answer.c_str());
  return outcome->status == "completed" ? 0 : 1;
}

int ShowTask(const Flags& flags) {
  if (flags.positional.size() != 1) return Usage("show needs exactly one task ID");
  const std::string id = flags.positional[0];
  if (!IsValidId(id, "task")) return Usage(absl::StrCat("'", id, "' is not a task id (task_<24 hex>)"));
  const std::string url = Get(flags, "--ledger", DefaultLedgerUrl());
  try {
    pqxx::connection c(url);
    pqxx::read_transaction tx(c);
    pqxx::result rows = tx.exec_params(
        "SELECT seq, ts_unix_us, type, actor, payload_json FROM ledger_events WHERE stream_id = $1 ORDER BY seq",
        id);
    if (rows.empty()) {
      std::fprintf(stderr, "gantry task show: no events for %s\n", id.c_str());
      return 1;
    }
    for (const auto& row : rows) {
      const std::string type = row["type"].as<std::string>();
      auto payload = json::Parse(row["payload_json"].as<std::string>());
      long long us = row["ts_unix_us"].as<long long>();
      time_t secs = static_cast<time_t>(us / 1000000);
      tm t;
      gmtime_r(&secs, &t);
      char ts[40];
      std::snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03lldZ", t.tm_year + 1900, t.tm_mon + 1,
                    t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, (us % 1000000) / 1000);
      std::printf("%3lld  %s  %-16s %-8s %s\n", row["seq"].as<long long>(), ts, type.c_str(),
                  row["actor"].as<std::string>().c_str(),
                  payload.ok() ? SummarizeEvent(type, *payload).c_str() : "(payload is not JSON)");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gantry task show: %s\n", OneLine(e.what(), 300).c_str());
    return 1;
  }
  auto report = ledger::VerifyLedger(url, id);
  if (!report.ok()) {
    std::fprintf(stderr, "gantry task show: verify: %s\n", report.status().ToString().c_str());
    return 1;
  }
  if (!report->ok()) {
    std::printf("chain: BROKEN at seq %llu: %s\n", static_cast<unsigned long long>(report->broken[0].seq),
                report->broken[0].problem.c_str());
    return 1;
  }
  std::printf("chain: verified, %llu events\n", static_cast<unsigned long long>(report->events));
  return 0;
}

}  // namespace

std::string SummarizeEvent(const std::string& type, const Value& p) {
  if (type == "task.started") {
    return absl::StrCat("model=", Text(p, "gen_ai.request.model"), " tools=", Text(p, "tools"),
                        " budget=", Text(p, "budget"), " goal=\"", OneLine(Text(p, "goal"), 80), "\"",
                        p.Find("gantry.task.parent_id") ? absl::StrCat(" parent=", Text(p, "gantry.task.parent_id")) : "");
  }
  if (type == "turn.requested") {
    return absl::StrCat("turn ", Text(p, "turn"), " max_tokens=", Text(p, "max_tokens"), " (",
                        Text(p, "tokens_used"), " used, ", Text(p, "tokens_left"), " left)");
  }
  if (type == "turn.completed") {
    return absl::StrCat("turn ", Text(p, "turn"), " finish=", OneLine(Text(p, "gen_ai.response.finish_reasons"), 40),
                        " in=", Text(p, "gen_ai.usage.input_tokens"), " out=", Text(p, "gen_ai.usage.output_tokens"),
                        " used=", Text(p, "tokens_used"), " calls=", Text(p, "tool_calls"),
                        FirstTokenText(p), " ", Text(p, "gantry.request_id"));
  }
  if (type == "turn.failed") {
    return absl::StrCat("turn ", Text(p, "turn"), " ", Text(p, "error.type"), ": ", OneLine(Text(p, "error.message"), 120));
  }
  if (type == "tool.proposed") {
    return absl::StrCat(Text(p, "gen_ai.tool.name"), " ", OneLine(Text(p, "arguments"), 120), " ",
                        Text(p, "gen_ai.tool.call.id"));
  }
  if (type == "tool.denied") {
    return absl::StrCat(Text(p, "gen_ai.tool.name"), " by ", Text(p, "decided_by"), ": ",
                        OneLine(Text(p, "reason"), 160));
  }
  if (type == "tool.executed") {
    std::string s = absl::StrCat(Text(p, "gen_ai.tool.name"), " ", Text(p, "outcome"));
    if (p.Find("exit_code")) absl::StrAppend(&s, " exit=", Text(p, "exit_code"));
    if (p.Find("stdout_bytes")) absl::StrAppend(&s, " stdout=", Text(p, "stdout_bytes"), "B");
    if (p.Find("denial_reason")) absl::StrAppend(&s, " ", OneLine(Text(p, "denial_reason"), 120));
    if (p.Find("error.message")) absl::StrAppend(&s, " ", OneLine(Text(p, "error.message"), 120));
    return s;
  }
  if (type == "task.delegated") {
    return absl::StrCat(Text(p, "gantry.task.child_id"), " tools=", Text(p, "tools"), " fs.read=", Text(p, "fs.read"),
                        " tokens=", Text(p, "max_model_tokens"), " calls=", Text(p, "max_tool_calls"), " goal=\"",
                        OneLine(Text(p, "goal"), 80), "\"");
  }
  if (type == "budget.warning") {
    return absl::StrCat(Text(p, "budget"), " at ", Text(p, "threshold_percent"), "%: ", Text(p, "used"), " of ",
                        Text(p, "limit"));
  }
  if (type == "task.finished") {
    return absl::StrCat(Text(p, "status"), " (", OneLine(Text(p, "reason"), 120), ") tokens=",
                        Text(p, "model_tokens_used"), "/", Text(p, "max_model_tokens"), " calls=",
                        Text(p, "tool_calls"), " acceptance=", OneLine(Text(p, "acceptance"), 200));
  }
  return OneLine(json::DumpCompact(p), 160);
}

int RunTaskCommand(const std::vector<std::string>& args) {
  if (args.empty()) return Usage("missing subcommand (run, show)");
  if (args[0] == "run") {
    Flags f = ParseFlags(args, 1, {"--router", "--sandbox", "--sandbox-key", "--sandbox-server-key", "--ledger", "--key", "--spool-dir"}, {"--quiet"});
    if (!f.error.empty()) return Usage(f.error);
    return RunTask(f);
  }
  if (args[0] == "show") {
    Flags f = ParseFlags(args, 1, {"--ledger"}, {});
    if (!f.error.empty()) return Usage(f.error);
    return ShowTask(f);
  }
  return Usage(absl::StrCat("unknown subcommand '", args[0], "' (run, show)"));
}

}  // namespace gantry::harness
