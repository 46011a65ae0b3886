// gantry-router: the gateway process. Parses flags and wires the libraries
// (docs/router.md); all logic lives in //router:gateway, :broker and :http.
#include <sys/resource.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"
#include "ledger/writer.h"
#include "policy/policy_reloader.h"
#include "router/budget/budget_sync.h"
#include "router/budget/budget_tracker.h"
#include "router/broker/broker.h"
#include "router/gateway.h"
#include "router/grpc_gateway.h"
#include "router/http_gateway.h"
#include "router/router_flags.h"
#include "router/http/http_server.h"
#include "router/http/tls.h"

namespace {
volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }
// Every client connection and every stream needs a descriptor: use the whole hard limit.
void RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &limit);
  }
}

int Die(const char* what, const std::string& why) {
  std::fprintf(stderr, "gantry-router: %s: %s\n", what, why.c_str());
  return 1;
}
}  // namespace

int main(int argc, char** argv) {
  using namespace gantry;
  auto parsed = router::ParseRouterFlags(std::vector<std::string>(argv + 1, argv + argc));
  if (!parsed.ok()) {
    std::fprintf(stderr, "gantry-router: %s\n%s", std::string(parsed.status().message()).c_str(),
                 router::RouterUsage());
    return 2;
  }
  if (parsed->help) {
    std::fputs(router::RouterUsage(), stdout);
    return 0;
  }
  const router::RouterFlags& flags = *parsed;
  InitLogging("router");
  RaiseOpenFileLimit();
  auto policy = policy::PolicyReloader::Create(flags.policy_path);
  if (!policy.ok()) return Die("policy", policy.status().ToString());
  (void)(*policy)->StartWatching();
  (void)(*policy)->InstallSighupHandler();
  auto models = router::LoadModelCatalog(flags.models_path);
  if (!models.ok()) return Die("models", models.status().ToString());
  std::unique_ptr<ledger::LedgerWriter> ledger_writer;
  std::unique_ptr<router::LedgerRecorder> recorder;
  if (!flags.ledger_url.empty()) {
    ledger::WriterOptions options;
    options.database_url = flags.ledger_url;
    options.spool_dir = flags.spool_dir;
    options.key_file = flags.ledger_key;
    auto writer = ledger::LedgerWriter::Start(options);
    if (!writer.ok()) return Die("ledger", writer.status().ToString());
    ledger_writer = std::move(*writer);
    recorder = std::make_unique<router::LedgerRecorder>(ledger_writer.get());
  }
  auto broker_options = router::BrokerOptionsFromFlags(flags);
  if (!broker_options.ok()) return Die("worker keys", broker_options.status().ToString());
  auto broker = broker::Broker::Start(*broker_options);
  if (!broker.ok()) return Die("workers", broker.status().ToString());
  router::GatewayOptions options;
  policy::PolicyReloader* reloader = policy->get();
  options.policy = [reloader] { return reloader->Current(); };
  options.policy_reload_errors = [reloader] { return reloader->reload_errors(); };
  router::BudgetTracker budgets;
  options.budgets = &budgets;
  std::unique_ptr<router::BudgetSync> budget_sync;  // shared with the ledger's other routers
  if (!flags.ledger_url.empty() && flags.budget_sync_ms > 0) {
    router::BudgetSyncOptions sync_options;
    sync_options.database_url = flags.ledger_url;
    sync_options.interval_ms = flags.budget_sync_ms;
    auto sync = router::BudgetSync::Start(&budgets, sync_options);
    if (!sync.ok()) return Die("budget sync", sync.status().ToString());
    budget_sync = std::move(*sync);
  }
  options.models = std::move(*models);
  options.broker = broker->get();
  options.recorder = recorder.get();
  router::Gateway gateway(std::move(options));
  http::HttpServerOptions http_options;
  http_options.host = flags.http_host;
  http_options.port = flags.http_port;
  if (!flags.tls_cert.empty()) {
    auto tls = http::TlsContext::Load(flags.tls_cert, flags.tls_key);
    if (!tls.ok()) return Die("tls", tls.status().ToString());
    http_options.tls = std::move(*tls);
  }
  // Small non-streamed requests are admitted on the loop thread (no hand-off).
  http_options.run_on_loop = &router::HttpGateway::AnswersWithoutBlocking;
  // An unknown key is answered 401 once the headers are in, before the body is read.
  router::HttpGateway http_gateway(&gateway);
  http_options.on_headers = [&http_gateway](const http::HttpRequest& head, std::string* key) {
    return http_gateway.CheckHead(head, key);
  };
  auto server = http::HttpServer::Start(
      http_options, [&http_gateway](http::HttpRequest request,
                                    std::shared_ptr<http::ResponseWriter> writer) {
        http_gateway.Handle(std::move(request), std::move(writer));
      });
  if (!server.ok()) return Die("listen", server.status().ToString());
  std::unique_ptr<router::GrpcGateway> grpc;  // --grpc-listen: the same pipeline over gRPC
  if (!flags.grpc_listen.empty()) {
    auto started = router::GrpcGateway::Start(
        &gateway, {flags.grpc_listen, flags.tls_cert, flags.tls_key});
    if (!started.ok()) return Die("grpc-listen", started.status().ToString());
    grpc = std::move(*started);
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  Log(LogLevel::kInfo, "router.started",
      {{"listen", flags.listen}, {"tls", flags.tls_cert.empty() ? "off" : "on"},
       {"grpc_listen", grpc ? flags.grpc_listen : "off"},
       {"workers", (*broker)->endpoint()},
       {"curve", broker_options->curve ? "on" : "off"}, {"policy", flags.policy_path},
       {"budget_sync", budget_sync ? budget_sync->router_id() : "off"}});
  while (!g_stop) pause();
  Log(LogLevel::kInfo, "router.stopping");
  grpc.reset();       // cancels its streams in flight
  (*server)->Stop();  // cancels requests in flight
  // Their workers' FINALs (what each request is charged) come within a decode step or a
  // prefill chunk; the broker treats a worker that does not answer as lost after
  // cancel_ack_timeout_ms. Wait for them, then end what is left while the gateway is
  // still there to record it.
  for (int waited_ms = 0; (*broker)->stats().in_flight > 0 && waited_ms < 5000; waited_ms += 10) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  (*broker)->Stop();
  return 0;
}
