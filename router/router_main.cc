// gantry-router: the gateway process. Parses flags and wires the libraries
// (docs/router.md); all logic lives in //router:gateway, :broker and :http.
#include <sys/resource.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "common/log.h"
#include "ledger/writer.h"
#include "policy/policy_reloader.h"
#include "router/budget/budget_tracker.h"
#include "router/broker/broker.h"
#include "router/gateway.h"
#include "router/http/http_server.h"

namespace {
volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }
int Usage() {
  std::fprintf(stderr,
               "usage: gantry-router --policy FILE --models FILE [--listen 127.0.0.1:8080]\n"
               "       [--workers tcp://127.0.0.1:5555] [--ledger URL --ledger-spool DIR]\n");
  return 2;
}
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
  std::string listen = "127.0.0.1:8080", workers = "tcp://127.0.0.1:5555";
  std::string policy_path, models_path, ledger_url, spool_dir = "/var/lib/gantry/spool";
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) return Usage();
    std::string value = argv[++i];
    if (flag == "--listen") listen = value;
    else if (flag == "--workers") workers = value;
    else if (flag == "--policy") policy_path = value;
    else if (flag == "--models") models_path = value;
    else if (flag == "--ledger") ledger_url = value;
    else if (flag == "--ledger-spool") spool_dir = value;
    else return Usage();
  }
  if (policy_path.empty() || models_path.empty()) return Usage();
  InitLogging("router");
  RaiseOpenFileLimit();
  auto policy = policy::PolicyReloader::Create(policy_path);
  if (!policy.ok()) return Die("policy", policy.status().ToString());
  (void)(*policy)->StartWatching();
  (void)(*policy)->InstallSighupHandler();
  auto models = router::LoadModelCatalog(models_path);
  if (!models.ok()) return Die("models", models.status().ToString());
  std::unique_ptr<ledger::LedgerWriter> ledger_writer;
  std::unique_ptr<router::LedgerRecorder> recorder;
  if (!ledger_url.empty()) {
    ledger::WriterOptions options;
    options.database_url = ledger_url;
    options.spool_dir = spool_dir;
    auto writer = ledger::LedgerWriter::Start(options);
    if (!writer.ok()) return Die("ledger", writer.status().ToString());
    ledger_writer = std::move(*writer);
    recorder = std::make_unique<router::LedgerRecorder>(ledger_writer.get());
  }
  broker::BrokerOptions broker_options;
  broker_options.endpoint = workers;
  auto broker = broker::Broker::Start(broker_options);
  if (!broker.ok()) return Die("workers", broker.status().ToString());
  router::GatewayOptions options;
  policy::PolicyReloader* reloader = policy->get();
  options.policy = [reloader] { return reloader->Current(); };
  options.policy_reload_errors = [reloader] { return reloader->reload_errors(); };
  router::BudgetTracker budgets;
  options.budgets = &budgets;
  options.models = std::move(*models);
  options.broker = broker->get();
  options.recorder = recorder.get();
  router::Gateway gateway(std::move(options));
  http::HttpServerOptions http_options;
  size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return Die("listen", "expected HOST:PORT");
  http_options.host = listen.substr(0, colon);
  http_options.port = std::atoi(listen.c_str() + colon + 1);
  auto server = http::HttpServer::Start(
      http_options, [&gateway](http::HttpRequest request,
                               std::shared_ptr<http::ResponseWriter> writer) {
        gateway.Handle(std::move(request), std::move(writer));
      });
  if (!server.ok()) return Die("listen", server.status().ToString());
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  Log(LogLevel::kInfo, "router.started",
      {{"listen", listen}, {"workers", (*broker)->endpoint()}, {"policy", policy_path}});
  while (!g_stop) pause();
  Log(LogLevel::kInfo, "router.stopping");
  (*server)->Stop();  // cancels requests in flight
  return 0;
}
