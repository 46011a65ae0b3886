// Benchmark (a program, not a test): what the router adds to a request.
//
//   bazel run //router:router_bench -- [--requests 3000] [--seconds 5] [--concurrency 8,16,32]
//                                       [--profile routed|tools]
//
// --profile sends only that kind of request, one at a time, for --seconds, prints the
// count and exits: a steady load to run perf(1) on, no figures.
//
// Both sides in one run, against the same worker, a TEST DOUBLE (FakeWorkerForTest:
// the real GNTW/1 codec over a real DEALER socket, answering every REQUEST at once with
// "Hi" and FINAL), so that what is measured is the router and not a model:
//   direct  a GNTW/1 client on its own ROUTER socket sends REQUEST and waits for FINAL
//           (the least any caller of a worker must do);
//   routed  an HTTP/1.1 keep-alive client POSTs /v1/chat/completions (non-streamed) to
//           the real gateway: HTTP parsing, authentication, policy, template render and
//           token count (the Qwen3 tokenizer and template from $GANTRY_REFERENCE_DIR when
//           set, else the tiny test tokenizer), context check, budget reservation,
//           admission, the broker, and the OpenAI response body.
//   tools   routed, the request offering 12 tools as a coding agent does (6 granted, 6
//           stripped by the policy) and the worker answering with a tool call that the
//           policy decides before it goes out (latency only; a second model of the same
//           bundle, served by a worker double of its own with that script).
//   directt direct, with the tools request exactly as the router hands it to its worker
//           (the 6 granted tools), to a worker double with the tools script.
// Latency: one request at a time, p50 / p99; added = routed - direct, and with tools,
// tools - directt (each direct request is the one the router sent for the routed
// request, captured from the router's worker double). The four are
// measured interleaved (a direct, a routed and a tools request in turn, the order
// rotating each round), so that all three see the same machine: on a shared 2-core
// machine, phases measured one after the other differed by tens of microseconds for
// the same binary and request.
// Throughput: for each count in `--concurrency`, that many requests kept in flight for
// `--seconds` each way by one client thread (direct: on its socket; routed: one per
// keep-alive connection, multiplexed with epoll), requests per second. The first count
// is the headline figure; the larger ones show where each side saturates the machine.
//   grpc    the same request as a gRPC Gateway Chat call (router/grpc_gateway.h) over one
//           HTTP/2 channel: the admitted event, "Hi", the Terminal (throughput: the first
//           count of blocking client threads).
//   baregrpc the same gRPC calls to a gRPC server that answers them itself (no router):
//           gRPC's own cost, so that the router's share over gRPC can be told apart.
// Accessibility: a principal of the accessibility class streams the same request
// (SSE); time from sending to the `: admitted` comment and to the first text chunk,
// p50 / p99 (the goal: admitted within 100 ms).
// Every run prints the load average: on a 2-core machine shared with builds, figures
// are only comparable within one run.
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <pqxx/pqxx>
#include <zmq.hpp>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/ids.h"
#include "common/sha256.h"
#include "common/zmq_io.h"
#include "gantry/v1/gateway.grpc.pb.h"
#include "ledger/ledger_key.h"
#include "ledger/schema.h"
#include "ledger/writer.h"
#include "proto/worker_frames.h"
#include "router/fake_worker_for_test.h"
#include "router/gateway.h"
#include "router/grpc_gateway.h"
#include "router/in_process_router_for_test.h"
#include "router/http/test_http_client.h"

namespace gantry::router {
namespace {

using Clock = std::chrono::steady_clock;
using testing::FakeStep;
using testing::FakeWorkerForTest;
using testing::FakeWorkerOptions;

constexpr char kModel[] = "bench-model";
constexpr char kToolsModel[] = "bench-model-tools";  // the same bundle, for the tools case
constexpr char kKey[] = "k-bench";
constexpr char kA11yKey[] = "k-bench-a11y";
constexpr char kPrompt[] = "Say hi.";

double Micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5));
  return v[i];
}

std::string Policy() {
  return absl::StrCat(R"(version: 1
defaults:
  budgets: {tokens_per_day: 1000000000000, tokens_per_month: 1000000000000, requests_per_minute: 100000000, concurrent_requests: 100000}
models:
  - {name: bench-model, bundles: [bench-bundle]}
  - {name: bench-model-tools, bundles: [bench-bundle]}
principals:
  users:
    - {name: bench, key_sha256: )", Sha256Hex(kKey), R"(, priority: interactive}
    - {name: reader, key_sha256: )", Sha256Hex(kA11yKey), R"(, priority: accessibility}
grants:
  - user: bench
    models:
      bench-model:
        max_tokens: {max: 16, action: clamp}
      bench-model-tools:
        max_tokens: {max: 16, action: clamp}
    tools:
      read_file: {args: {path: {globs: ["/workspace/**"]}}}
      list_directory: {args: {path: {globs: ["/workspace", "/workspace/**"]}}}
      glob: {}
      grep_search: {}
      edit: {args: {file_path: {globs: ["/workspace/**"]}}}
      todo_write: {}
  - user: reader
    models:
      bench-model:
        max_tokens: {max: 16, action: clamp}
)");
}

FakeWorkerOptions WorkerOptions(const std::string& endpoint, int slots) {
  FakeWorkerOptions w;
  w.endpoint = endpoint;
  w.worker_id = "bench/1/fake";
  w.model = kModel;
  w.slots = slots;
  w.script = {FakeStep::Text("Hi"), FakeStep::Finish(v1::FINISH_STOP)};
  return w;
}

// The tools case's worker: its answer is a tool call the policy decides (granted, its
// path argument matched against its glob) before it goes out.
FakeWorkerOptions ToolsWorkerOptions(const std::string& endpoint) {
  FakeWorkerOptions w = WorkerOptions(endpoint, 1);
  w.worker_id = "bench/2/fake";
  w.model = kToolsModel;
  w.script = {FakeStep::Text("Hi"),
              FakeStep::ToolCall("read_file", R"({"path":"/workspace/src/main.cc"})"),
              FakeStep::Finish(v1::FINISH_TOOL_CALLS)};
  return w;
}

// ---- direct: a bare GNTW/1 client -------------------------------------------------

class DirectClient {
 public:
  DirectClient() : socket_(context_, zmq::socket_type::router) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.bind("tcp://127.0.0.1:*");
    endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
  }
  const std::string& endpoint() const { return endpoint_; }

  // Waits for the worker's READY.
  bool Connect() {
    while (true) {
      auto message = Receive(5000);
      if (!message) return false;
      if (std::holds_alternative<v1::Ready>(*message)) return true;
    }
  }

  // The plain request, or `as` (what the router sent its worker for the same request)
  // under a new id.
  void Send(const std::string& request_id, const v1::InferenceRequest* as = nullptr) {
    v1::Request request;
    v1::InferenceRequest* r = request.mutable_request();
    if (as != nullptr) {
      *r = *as;
    } else {
      r->set_model(kModel);
      r->set_max_tokens(16);
      auto* m = r->add_messages();
      m->set_role("user");
      m->set_content(kPrompt);
    }
    r->set_request_id(request_id);
    std::vector<std::string> frames = wire::EncodeFrames(request);
    frames.insert(frames.begin(), identity_);
    (void)SendFrames(socket_, frames);
  }

  // The request id of the next FINAL, or "" on a timeout.
  std::string NextFinal() {
    while (true) {
      auto message = Receive(5000);
      if (!message) return "";
      if (auto* final = std::get_if<v1::Final>(&*message)) return final->request_id();
    }
  }

 private:
  std::optional<wire::WorkerMessage> Receive(int timeout_ms) {
    while (true) {
      auto frames = RecvFrames(socket_, timeout_ms, RecvLimits{});
      if (!frames.ok() || frames->size() < 2) return std::nullopt;
      identity_ = (*frames)[0];
      frames->erase(frames->begin());
      auto message = wire::DecodeFrames(*frames, wire::Direction::kWorkerToRouter);
      if (message.ok()) return *message;
    }
  }

  zmq::context_t context_;
  zmq::socket_t socket_;
  std::string endpoint_;
  std::string identity_;
};

// ---- routed: the gateway in this process, as gantry-router wires it ----------------

// --evidence spool|pg: the router records its ledger events through a real LedgerWriter
// and holds each answer until they are durable (docs/ledger.md, "Durability"): "spool"
// fsyncs them into a spool in a temporary directory (Postgres unreachable); "pg" commits
// them in a fresh database of $GANTRY_TEST_PG_URL, as the writer role.
struct Evidence {
  std::unique_ptr<ledger::LedgerWriter> writer;
  std::unique_ptr<LedgerRecorder> recorder;
  std::string dir;
};

std::unique_ptr<Evidence> StartEvidence(const std::string& mode) {
  if (mode.empty() || mode == "none") return nullptr;
  auto evidence = std::make_unique<Evidence>();
  char tmpl[] = "/tmp/router-bench-evidence-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) return nullptr;
  evidence->dir = tmpl;
  ledger::WriterOptions options;
  options.spool_dir = evidence->dir + "/spool";
  options.key_file = evidence->dir + "/ledger.key";
  if (!ledger::GenerateKeyFile(options.key_file).ok()) return nullptr;
  if (mode == "spool") {
    options.database_url = "postgresql://postgres@127.0.0.1:1/postgres?connect_timeout=1";
    options.retry_interval_ms = 1 << 30;  // never again: every batch is an fsync
  } else if (mode == "pg") {
    const char* server = std::getenv("GANTRY_TEST_PG_URL");
    if (server == nullptr) {
      std::fprintf(stderr, "router_bench: --evidence pg needs GANTRY_TEST_PG_URL\n");
      return nullptr;
    }
    try {
      std::string url = server;
      const std::string db = NewId("bench");
      {
        pqxx::connection admin(url);
        pqxx::nontransaction tx(admin);
        tx.exec0("CREATE DATABASE " + db);
      }
      url = url.substr(0, url.rfind('/') + 1) + db;
      pqxx::connection owner(url);
      if (!ledger::SetupLedger(owner, "").ok()) return nullptr;
      const size_t at = url.find("://") + 3;
      options.database_url = absl::StrCat(url.substr(0, at), ledger::kWriterRole,
                                          url.substr(url.find('@', at)));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "router_bench: %s\n", e.what());
      return nullptr;
    }
  } else {
    std::fprintf(stderr, "router_bench: --evidence none|spool|pg\n");
    return nullptr;
  }
  auto writer = ledger::LedgerWriter::Start(options);
  if (!writer.ok()) {
    std::fprintf(stderr, "router_bench: %s\n", writer.status().ToString().c_str());
    return nullptr;
  }
  evidence->writer = std::move(*writer);
  evidence->recorder = std::make_unique<LedgerRecorder>(evidence->writer.get());
  return evidence;
}

std::unique_ptr<InProcessRouterForTest> StartRouter(std::string* counted_with,
                                                    EventRecorder* recorder) {
  absl::StatusOr<std::shared_ptr<const PromptCounter>> counter;
  if (const char* ref = std::getenv("GANTRY_REFERENCE_DIR")) {
    counter = LoadPromptCounter(std::string(ref) + "/tokenizers/qwen3");
    *counted_with = "qwen3 tokenizer and chat template";
  }
  ModelEntry entry = TinyModelEntryForTest(kModel);
  if (counter.ok() && *counter != nullptr) {
    entry.counter = *counter;
  } else {
    *counted_with = "tiny test tokenizer (set GANTRY_REFERENCE_DIR for Qwen3's)";
  }
  if (entry.counter == nullptr) return nullptr;
  ModelEntry tools_entry = entry;
  tools_entry.name = kToolsModel;
  auto router = InProcessRouterForTest::Start(
      Policy(), {{kModel, entry}, {kToolsModel, tools_entry}}, {}, recorder);
  return router.ok() ? std::move(*router) : nullptr;
}

const std::string& ChatBody() {
  static const std::string body = absl::StrCat(R"({"model":")", kModel,
                                               R"(","max_tokens":16,"messages":[{"role":"user","content":")",
                                               kPrompt, R"("}]})");
  return body;
}

// The same request offering 12 tools as a coding agent does (6 granted, 6 stripped),
// each with a small JSON Schema.
const std::string& ToolsBody() {
  static const std::string body = [] {
    std::string tools;
    for (const char* name : {"read_file", "list_directory", "glob", "grep_search", "edit",
                             "todo_write", "run_shell_command", "write_file", "web_fetch",
                             "agent", "notebook_edit", "memory"}) {
      absl::StrAppend(&tools, tools.empty() ? "" : ",",
                      R"({"type":"function","function":{"name":")", name,
                      R"(","description":"A tool.","parameters":{"type":"object","properties":)",
                      R"({"path":{"type":"string"},"limit":{"type":"integer"}},"required":["path"]}}})");
    }
    return absl::StrCat(R"({"model":")", kToolsModel,
                        R"(","max_tokens":16,"messages":[{"role":"user","content":")", kPrompt,
                        R"("}],"tools":[)", tools, "]}");
  }();
  return body;
}

bool Post(http::TestHttpClient* client, const std::string& body = ChatBody()) {
  static const std::vector<std::pair<std::string, std::string>> headers = {
      {"Content-Type", "application/json"}, {"Authorization", absl::StrCat("Bearer ", kKey)}};
  if (!client->SendRequest("POST", "/v1/chat/completions", body, headers).ok()) return false;
  auto response = client->ReadResponse(10000);
  return response.ok() && response->status == 200;
}

// A streamed request of the accessibility principal: microseconds from sending to the
// `: admitted` comment and to the first text chunk. False on any failure.
bool PostAccessible(http::TestHttpClient* client, double* admitted_us, double* first_text_us) {
  static const std::vector<std::pair<std::string, std::string>> headers = {
      {"Content-Type", "application/json"}, {"Authorization", absl::StrCat("Bearer ", kA11yKey)}};
  static const std::string body = absl::StrCat(
      R"({"model":")", kModel, R"(","stream":true,"max_tokens":16,"messages":[{"role":"user","content":")",
      kPrompt, R"("}]})");
  *admitted_us = *first_text_us = -1;
  auto start = Clock::now();
  if (!client->SendRequest("POST", "/v1/chat/completions", body, headers).ok()) return false;
  auto response = client->ReadResponse(10000, [&](absl::string_view chunk) {
    if (*admitted_us < 0 && chunk.find(": admitted ") != absl::string_view::npos) {
      *admitted_us = Micros(Clock::now() - start);
    }
    if (*first_text_us < 0 && chunk.find("\"content\":\"Hi") != absl::string_view::npos) {
      *first_text_us = Micros(Clock::now() - start);
    }
    return true;
  });
  return response.ok() && response->status == 200 && *admitted_us >= 0 && *first_text_us >= 0;
}

// One gRPC Chat call read to its end. False unless it ends OK with "Hi" and a Terminal.
bool GrpcChat(v1::Gateway::Stub* stub) {
  static const v1::ChatRequest request = [] {
    v1::ChatRequest chat;
    chat.mutable_request()->set_model(kModel);
    chat.mutable_request()->set_max_tokens(16);
    v1::ChatMessage* m = chat.mutable_request()->add_messages();
    m->set_role("user");
    m->set_content(kPrompt);
    return chat;
  }();
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", absl::StrCat("Bearer ", kKey));
  auto reader = stub->Chat(&ctx, request);
  v1::StreamEvent event;
  bool hi = false, terminal = false;
  while (reader->Read(&event)) {
    hi |= event.has_text() && event.text().text() == "Hi";
    terminal |= event.has_terminal();
  }
  return reader->Finish().ok() && hi && terminal;
}

// A gRPC Gateway without the router: every Chat is answered at once with the admitted
// event, "Hi" and the Terminal, on gRPC's synchronous server as the real one. What gRPC
// itself costs here, so that the router's share of the gRPC figures can be told apart.
class BareGrpcGateway final : public v1::Gateway::Service {
 public:
  grpc::Status Chat(grpc::ServerContext*, const v1::ChatRequest* request,
                    grpc::ServerWriter<v1::StreamEvent>* writer) override {
    v1::StreamEvent event;
    event.set_request_id("bare");
    event.mutable_admitted()->set_priority(v1::PRIORITY_INTERACTIVE);
    if (request->request().model() != kModel || !writer->Write(event)) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "");
    }
    event.set_seq(1);
    event.mutable_text()->set_text("Hi");
    if (!writer->Write(event)) return grpc::Status(grpc::StatusCode::CANCELLED, "");
    event.set_seq(2);
    event.mutable_terminal()->set_finish_reason(v1::FINISH_STOP);
    writer->WriteLast(event, grpc::WriteOptions());
    return grpc::Status::OK;
  }
};

// `n` rounds of one call of each of `calls` in turn, the first of a round rotating: the
// latency of each call, in microseconds, per caller; empty when one fails.
std::vector<std::vector<double>> Interleaved(int n, const std::vector<const char*>& what,
                                             const std::vector<std::function<bool()>>& calls) {
  std::vector<std::vector<double>> us(calls.size());
  for (int i = 0; i < n; ++i) {
    for (size_t k = 0; k < calls.size(); ++k) {
      const size_t c = (i + k) % calls.size();
      auto start = Clock::now();
      if (!calls[c]()) {
        std::fprintf(stderr, "router_bench: %s request %d failed\n", what[c], i);
        return {};
      }
      us[c].push_back(Micros(Clock::now() - start));
    }
  }
  return us;
}

// `call` `n` times in a row: the latency of each, in microseconds; empty when one fails.
std::vector<double> Sequential(int n, const char* what, const std::function<bool()>& call) {
  std::vector<double> us;
  for (int i = 0; i < n; ++i) {
    auto start = Clock::now();
    if (!call()) {
      std::fprintf(stderr, "router_bench: %s request %d failed\n", what, i);
      return {};
    }
    us.push_back(Micros(Clock::now() - start));
  }
  return us;
}

struct Counts {
  int64_t done = 0;
  int64_t failed = 0;
};

// `concurrency` threads, each with its own caller from `make_caller`, calling it until
// `seconds` pass (a thread stops at its first failure).
Counts Concurrent(int concurrency, int seconds,
                  const std::function<std::function<bool()>()>& make_caller) {
  std::atomic<int64_t> done{0}, failed{0};
  auto end = Clock::now() + std::chrono::seconds(seconds);
  std::vector<std::thread> threads;
  for (int c = 0; c < concurrency; ++c) {
    threads.emplace_back([&, call = make_caller()] {
      while (Clock::now() < end) {
        if (!call()) {
          ++failed;
          return;
        }
        ++done;
      }
    });
  }
  for (auto& t : threads) t.join();
  return {done.load(), failed.load()};
}

// gRPC Chat calls through `stub`: `requests` in a row (the latency of each; empty when
// one fails), then `concurrency` blocking client threads for `seconds`.
struct GrpcRuns {
  std::vector<double> us;
  Counts counts;
};
GrpcRuns MeasureGrpc(v1::Gateway::Stub* stub, const char* what, int requests, int concurrency,
                     int seconds) {
  auto caller = [stub]() -> std::function<bool()> { return [stub] { return GrpcChat(stub); }; };
  GrpcRuns runs;
  runs.us = Sequential(requests, what, caller());
  if (!runs.us.empty()) runs.counts = Concurrent(concurrency, seconds, caller);
  return runs;
}

// Routed throughput the way the direct side is driven: one client thread keeping
// `concurrency` requests in flight, here over `concurrency` keep-alive connections
// multiplexed with epoll (the direct client keeps them in flight on one socket). Each
// response must be a 200 whose body holds the worker's "Hi"; the first that is not ends
// the run as a failure.
Counts HttpLoad(int port, int concurrency, int seconds) {
  static const std::string request = absl::StrCat(
      "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Authorization: Bearer ", kKey, "\r\nContent-Length: ", ChatBody().size(), "\r\n\r\n",
      ChatBody());
  struct Conn {
    int fd = -1;
    std::string in;
  };
  Counts counts;
  std::vector<Conn> conns(concurrency);
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  auto send_request = [&](Conn& c) {
    return send(c.fd, request.data(), request.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(request.size());
  };
  for (int i = 0; i < concurrency; ++i) {
    auto client = http::TestHttpClient::Connect(port);
    if (!client.ok()) {
      ++counts.failed;
      break;
    }
    conns[i].fd = client->ReleaseFd();
    if (conns[i].fd < 0) {
      ++counts.failed;
      break;
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = static_cast<uint32_t>(i);
    epoll_ctl(ep, EPOLL_CTL_ADD, conns[i].fd, &ev);
    if (!send_request(conns[i])) ++counts.failed;
  }
  const auto end = Clock::now() + std::chrono::seconds(seconds);
  epoll_event events[64];
  char buffer[16384];
  while (counts.failed == 0 && Clock::now() < end) {
    const int n = epoll_wait(ep, events, 64, 1000);
    for (int e = 0; e < n && counts.failed == 0; ++e) {
      Conn& c = conns[events[e].data.u32];
      const ssize_t got = recv(c.fd, buffer, sizeof(buffer), 0);
      if (got <= 0) {
        ++counts.failed;
        break;
      }
      c.in.append(buffer, static_cast<size_t>(got));
      // A whole response: the head, then Content-Length bytes.
      const size_t head_end = c.in.find("\r\n\r\n");
      if (head_end == std::string::npos) continue;
      const size_t length_at = c.in.find("Content-Length: ");
      if (length_at == std::string::npos || length_at > head_end) {
        ++counts.failed;
        break;
      }
      const size_t length = std::strtoul(c.in.c_str() + length_at + 16, nullptr, 10);
      if (c.in.size() < head_end + 4 + length) continue;
      const absl::string_view body = absl::string_view(c.in).substr(head_end + 4, length);
      if (c.in.compare(0, 13, "HTTP/1.1 200 ") != 0 ||
          body.find("\"content\":\"Hi\"") == absl::string_view::npos ||
          c.in.size() != head_end + 4 + length) {
        ++counts.failed;
        break;
      }
      c.in.clear();
      ++counts.done;
      if (!send_request(c)) ++counts.failed;
    }
  }
  // Closing a connection with a request in flight cancels that request in the router.
  for (Conn& c : conns) {
    if (c.fd >= 0) close(c.fd);
  }
  close(ep);
  return counts;
}

// The value after `name`, or null.
const char* FlagText(int argc, char** argv, const char* name) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == name) return argv[i + 1];
  }
  return nullptr;
}

int Flag(int argc, char** argv, const char* name, int fallback) {
  const char* text = FlagText(argc, argv, name);
  return text != nullptr ? std::atoi(text) : fallback;
}

double LoadAverage() {
  double load = 0;
  FILE* f = std::fopen("/proc/loadavg", "r");
  if (f != nullptr) {
    if (std::fscanf(f, "%lf", &load) != 1) load = 0;
    std::fclose(f);
  }
  return load;
}

// The comma-separated counts after `name` ("8,16,32"), or `fallback`.
std::vector<int> FlagList(int argc, char** argv, const char* name, std::vector<int> fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) != name) continue;
    std::vector<int> values;
    for (absl::string_view part : absl::StrSplit(argv[i + 1], ',')) {
      int v = 0;
      if (absl::SimpleAtoi(part, &v) && v > 0) values.push_back(v);
    }
    if (!values.empty()) return values;
  }
  return fallback;
}

// Direct throughput: `concurrency` requests kept in flight by one client thread for
// `seconds`; the requests done.
int64_t DirectLoad(DirectClient* direct, int concurrency, int seconds) {
  int64_t done = 0, next = 0;
  for (; next < concurrency; ++next) direct->Send(absl::StrCat("req_t_", next));
  auto end = Clock::now() + std::chrono::seconds(seconds);
  while (Clock::now() < end) {
    if (direct->NextFinal().empty()) break;
    ++done;
    direct->Send(absl::StrCat("req_t_", next++));
  }
  for (int i = 0; i < concurrency; ++i) direct->NextFinal();
  return done;
}

int Main(int argc, char** argv) {
  const int requests = std::max(10, Flag(argc, argv, "--requests", 3000));
  const int seconds = std::max(1, Flag(argc, argv, "--seconds", 5));
  // Throughput is measured at each of these; the first is the headline and gRPC's.
  const std::vector<int> levels = FlagList(argc, argv, "--concurrency", {8, 16, 32});
  const int concurrency = levels[0];
  const int most = *std::max_element(levels.begin(), levels.end());
  std::printf("router_bench: %d sequential requests each way (direct, routed and tools "
              "interleaved), then %s requests in flight for %d s each way; load average %.2f\n",
              requests, absl::StrJoin(levels, ",").c_str(), seconds, LoadAverage());

  // Direct.
  DirectClient direct;
  FakeWorkerForTest direct_worker(WorkerOptions(direct.endpoint(), most));
  if (!direct.Connect()) {
    std::fprintf(stderr, "router_bench: the worker never sent READY\n");
    return 1;
  }
  const char* profile = FlagText(argc, argv, "--profile");
  std::vector<int64_t> direct_done;
  for (int level : levels) {
    if (profile == nullptr) direct_done.push_back(DirectLoad(&direct, level, seconds));
  }

  // Routed.
  std::string evidence_mode;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--evidence") evidence_mode = argv[i + 1];
  }
  std::unique_ptr<Evidence> evidence = StartEvidence(evidence_mode);
  if (!evidence_mode.empty() && evidence_mode != "none" && evidence == nullptr) return 1;
  std::printf("evidence: %s\n", evidence == nullptr ? "none (no ledger)"
                                 : evidence_mode == "pg"
                                     ? "durable in Postgres (group commit) before each answer"
                                     : "fsync'd in a spool (group commit) before each answer");
  std::string counted_with;
  auto router = StartRouter(&counted_with, evidence ? evidence->recorder.get() : nullptr);
  if (router == nullptr) {
    std::fprintf(stderr, "router_bench: the router did not start\n");
    return 1;
  }
  FakeWorkerForTest routed_worker(WorkerOptions(router->broker()->endpoint(), most));
  FakeWorkerForTest tools_worker(ToolsWorkerOptions(router->broker()->endpoint()));
  if (!routed_worker.WaitFor([&] { return router->broker()->stats().live_workers == 2; }, 5000)) {
    std::fprintf(stderr, "router_bench: the workers never became LIVE\n");
    return 1;
  }
  // A fresh keep-alive HTTP client per caller.
  auto http_caller = [&]() -> std::function<bool()> {
    auto client = std::make_shared<absl::StatusOr<http::TestHttpClient>>(
        http::TestHttpClient::Connect(router->port()));
    return [client] { return client->ok() && Post(&**client); };
  };
  if (const char* kind = profile) {
    std::function<bool()> call;
    if (std::string(kind) == "routed") call = http_caller();
    if (std::string(kind) == "tools") {
      auto client = std::make_shared<absl::StatusOr<http::TestHttpClient>>(
          http::TestHttpClient::Connect(router->port()));
      call = [client] { return client->ok() && Post(&**client, ToolsBody()); };
    }
    if (!call) {
      std::fprintf(stderr, "router_bench: --profile takes routed or tools\n");
      return 2;
    }
    int64_t sent = 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (std::chrono::steady_clock::now() < until && call()) ++sent;
    std::printf("profile %s: %lld requests in %d s\n", kind, static_cast<long long>(sent), seconds);
    return 0;
  }
  // Latency: direct, routed and tools requests interleaved. Each direct request is the
  // very request the router sends its worker for the routed one (captured from a first
  // routed request of each kind), to a worker double with the same script: what the
  // router adds is then the difference, and nothing the worker does with a larger
  // request counts as the router's.
  auto routed_call = http_caller();
  auto tools_client = std::make_shared<absl::StatusOr<http::TestHttpClient>>(
      http::TestHttpClient::Connect(router->port()));
  auto tools_call = [tools_client] { return tools_client->ok() && Post(&**tools_client, ToolsBody()); };
  if (!routed_call() || !tools_call() || routed_worker.requests().empty() ||
      tools_worker.requests().empty()) {
    std::fprintf(stderr, "router_bench: the first routed requests failed\n");
    return 1;
  }
  const v1::InferenceRequest plain_request = routed_worker.requests().back();
  const v1::InferenceRequest tools_request = tools_worker.requests().back();
  DirectClient direct_tools;
  FakeWorkerForTest direct_tools_worker(ToolsWorkerOptions(direct_tools.endpoint()));
  if (!direct_tools.Connect()) {
    std::fprintf(stderr, "router_bench: the tools worker never sent READY\n");
    return 1;
  }
  int direct_sent = 0;
  auto direct_call = [&direct, &direct_sent, &plain_request] {
    std::string id = absl::StrCat("req_direct_", direct_sent++);
    direct.Send(id, &plain_request);
    return direct.NextFinal() == id;
  };
  auto direct_tools_call = [&direct_tools, &direct_sent, &tools_request] {
    std::string id = absl::StrCat("req_direct_", direct_sent++);
    direct_tools.Send(id, &tools_request);
    return direct_tools.NextFinal() == id;
  };
  const std::vector<std::vector<double>> latency =
      Interleaved(requests, {"direct", "routed", "direct with tools", "routed with tools"},
                  {direct_call, routed_call, direct_tools_call, tools_call});
  if (latency.empty()) return 1;
  const std::vector<double>& direct_us = latency[0];
  const std::vector<double>& routed_us = latency[1];
  const std::vector<double>& direct_tools_us = latency[2];
  const std::vector<double>& tools_us = latency[3];
  std::vector<Counts> routed_at;
  for (int level : levels) routed_at.push_back(HttpLoad(router->port(), level, seconds));
  const Counts& routed = routed_at[0];

  // gRPC: the same pipeline behind the gRPC Gateway.
  auto grpc_gateway = GrpcGateway::Start(router->gateway(), {});
  if (!grpc_gateway.ok()) {
    std::fprintf(stderr, "router_bench: %s\n", grpc_gateway.status().ToString().c_str());
    return 1;
  }
  auto stub = v1::Gateway::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", (*grpc_gateway)->port()), grpc::InsecureChannelCredentials()));
  const GrpcRuns grpc_runs = MeasureGrpc(stub.get(), "gRPC", requests, concurrency, seconds);
  if (grpc_runs.us.empty()) return 1;
  const std::vector<double>& grpc_us = grpc_runs.us;
  const Counts& grpc = grpc_runs.counts;
  // The same calls to the bare gRPC Gateway.
  BareGrpcGateway bare_service;
  int bare_port = 0;
  grpc::ServerBuilder bare_builder;
  bare_builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &bare_port);
  bare_builder.RegisterService(&bare_service);
  std::unique_ptr<grpc::Server> bare_server = bare_builder.BuildAndStart();
  if (bare_server == nullptr || bare_port == 0) {
    std::fprintf(stderr, "router_bench: the bare gRPC server did not start\n");
    return 1;
  }
  auto bare_stub = v1::Gateway::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", bare_port), grpc::InsecureChannelCredentials()));
  const GrpcRuns bare_runs =
      MeasureGrpc(bare_stub.get(), "bare gRPC", requests, concurrency, seconds);
  if (bare_runs.us.empty()) return 1;
  const std::vector<double>& bare_us = bare_runs.us;
  const Counts& bare = bare_runs.counts;
  bare_server->Shutdown();

  // Accessibility: admitted, then the first text.
  std::vector<double> admitted_us, first_text_us;
  {
    auto client = http::TestHttpClient::Connect(router->port());
    if (!client.ok()) return 1;
    for (int i = 0; i < std::min(requests, 1000); ++i) {
      double admitted = 0, first_text = 0;
      if (!PostAccessible(&*client, &admitted, &first_text)) {
        std::fprintf(stderr, "router_bench: accessibility request %d failed\n", i);
        return 1;
      }
      admitted_us.push_back(admitted);
      first_text_us.push_back(first_text);
    }
  }

  const double d50 = Percentile(direct_us, 0.5), d99 = Percentile(direct_us, 0.99);
  const double r50 = Percentile(routed_us, 0.5), r99 = Percentile(routed_us, 0.99);
  std::printf("prompt counted with the %s\n", counted_with.c_str());
  std::printf("%-8s %10s %10s %14s\n", "path", "p50 us", "p99 us", "requests/s");
  std::printf("%-8s %10.1f %10.1f %14.0f\n", "direct", d50, d99, double(direct_done[0]) / seconds);
  std::printf("%-8s %10.1f %10.1f %14.0f\n", "routed", r50, r99, double(routed.done) / seconds);
  std::printf("%-8s %10.1f %10.1f %14.0f\n", "grpc", Percentile(grpc_us, 0.5),
              Percentile(grpc_us, 0.99), double(grpc.done) / seconds);
  std::printf("%-8s %10.1f %10.1f %14.0f   (gRPC alone: no router)\n", "baregrpc",
              Percentile(bare_us, 0.5), Percentile(bare_us, 0.99), double(bare.done) / seconds);
  const double dt50 = Percentile(direct_tools_us, 0.5), dt99 = Percentile(direct_tools_us, 0.99);
  std::printf("%-8s %10.1f %10.1f   (the tools request as the worker gets it: 6 tools)\n",
              "directt", dt50, dt99);
  std::printf("%-8s %10.1f %10.1f   (12 tools offered, 6 stripped; one tool call decided)\n",
              "tools", Percentile(tools_us, 0.5), Percentile(tools_us, 0.99));
  std::printf("added by the router: p50 %.1f us, p99 %.1f us; load average %.2f\n", r50 - d50,
              r99 - d99, LoadAverage());
  std::printf("added by the router with tools: p50 %.1f us, p99 %.1f us (goal: p50 under 200 us); "
              "over the plain direct request: p50 %.1f us\n",
              Percentile(tools_us, 0.5) - dt50, Percentile(tools_us, 0.99) - dt99,
              Percentile(tools_us, 0.5) - d50);
  int64_t routed_failed = 0;
  std::printf("%-12s %14s %14s %8s\n", "in flight", "direct req/s", "routed req/s", "ratio");
  for (size_t i = 0; i < levels.size(); ++i) {
    routed_failed += routed_at[i].failed;
    std::printf("%-12d %14.0f %14.0f %7.2fx%s\n", levels[i], double(direct_done[i]) / seconds,
                double(routed_at[i].done) / seconds,
                direct_done[i] > 0 ? double(routed_at[i].done) / direct_done[i] : 0.0,
                routed_at[i].failed > 0 ? " (failed)" : "");
  }
  std::printf("accessibility (SSE, %zu requests): admitted p50 %.1f us, p99 %.1f us; first text "
              "p50 %.1f us, p99 %.1f us (goal: admitted within 100 ms)\n",
              admitted_us.size(), Percentile(admitted_us, 0.5), Percentile(admitted_us, 0.99),
              Percentile(first_text_us, 0.5), Percentile(first_text_us, 0.99));
  std::printf("added by the router over gRPC: p50 %.1f us, p99 %.1f us (%lld gRPC failures); "
              "over bare gRPC: p50 %.1f us, p99 %.1f us\n",
              Percentile(grpc_us, 0.5) - d50, Percentile(grpc_us, 0.99) - d99,
              static_cast<long long>(grpc.failed), Percentile(grpc_us, 0.5) - Percentile(bare_us, 0.5),
              Percentile(grpc_us, 0.99) - Percentile(bare_us, 0.99));
  return routed_failed == 0 && grpc.failed == 0 && bare.failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace gantry::router

int main(int argc, char** argv) { return gantry::router::Main(argc, argv); }
