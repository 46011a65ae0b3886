#include "router/router_flags.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/curve_keys.h"
#include "router/broker/worker_auth.h"

namespace gantry::router {

namespace {

// HOST:PORT with a port in 0-65535. Errors: INVALID_ARGUMENT naming `flag`.
absl::Status ParseHostPort(const char* flag, const std::string& value, std::string* host,
                           int* port) {
  size_t colon = value.rfind(':');
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(value.substr(colon + 1), port) || *port < 0 || *port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", value, ": expected HOST:PORT"));
  }
  *host = value.substr(0, colon);
  return absl::OkStatus();
}

}  // namespace

const char* RouterUsage() {
  return "usage: gantry-router --policy FILE --models FILE [--listen 127.0.0.1:8080]\n"
         "       [--workers ipc:///run/gantry/workers.sock] [--ledger URL --ledger-spool DIR]\n"
         "       [--ledger-key FILE]\n"
         "       [--curve-key ROUTER.key --worker-keys ALLOWLIST] [--insecure-workers]\n"
         "       [--tls-cert CERT.pem --tls-key KEY.pem] [--grpc-listen HOST:PORT]\n"
         "       [--budget-sync-ms 500] [--help]\n"
         "workers (docs/router.md, \"Worker identity\"):\n"
         "  --workers ENDPOINT    where workers connect. Without CURVE only ipc://DIR/NAME is\n"
         "                        accepted, DIR owned by this user with mode 0700\n"
         "  --curve-key FILE      the router's CURVE secret key (0600); with --worker-keys\n"
         "  --worker-keys FILE    allow-list: one worker public key per line with\n"
         "                        models=NAME[,NAME] bundles=SHA256[,SHA256] (or *); a READY\n"
         "                        naming anything else is refused (worker_not_allowed)\n"
         "  --insecure-workers    accept plain workers on any endpoint (loopback tcp, a\n"
         "                        trusted network): any process that reaches it can serve\n"
         "                        and read prompts; logged as a warning at start\n";
}

absl::StatusOr<RouterFlags> ParseRouterFlags(const std::vector<std::string>& args) {
  RouterFlags flags;
  const std::pair<const char*, std::string*> with_value[] = {
      {"--listen", &flags.listen},         {"--workers", &flags.workers},
      {"--policy", &flags.policy_path},    {"--models", &flags.models_path},
      {"--ledger", &flags.ledger_url},     {"--ledger-spool", &flags.spool_dir},
      {"--ledger-key", &flags.ledger_key},
      {"--curve-key", &flags.curve_key},   {"--worker-keys", &flags.worker_keys},
      {"--tls-cert", &flags.tls_cert},     {"--tls-key", &flags.tls_key},
      {"--grpc-listen", &flags.grpc_listen}, {"--budget-sync-ms", &flags.budget_sync_ms_text},
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag == "--help" || flag == "-h") {
      RouterFlags help;
      help.help = true;
      return help;
    }
    if (flag == "--insecure-workers") {
      flags.insecure_workers = true;
      continue;
    }
    std::string* target = nullptr;
    for (const auto& [name, field] : with_value) {
      if (flag == name) target = field;
    }
    if (target == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown flag ", flag));
    if (i + 1 >= args.size()) {
      return absl::InvalidArgumentError(absl::StrCat(flag, " needs a value"));
    }
    *target = args[++i];
  }
  if (flags.policy_path.empty() || flags.models_path.empty()) {
    return absl::InvalidArgumentError("--policy and --models are required");
  }
  if (flags.curve_key.empty() != flags.worker_keys.empty()) {
    return absl::InvalidArgumentError("--curve-key and --worker-keys go together");
  }
  if (flags.tls_cert.empty() != flags.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (!absl::SimpleAtoi(flags.budget_sync_ms_text, &flags.budget_sync_ms) ||
      flags.budget_sync_ms < 0 || flags.budget_sync_ms > 60000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--budget-sync-ms ", flags.budget_sync_ms_text, ": expected 0 to 60000"));
  }
  auto listen = ParseHostPort("--listen", flags.listen, &flags.http_host, &flags.http_port);
  if (!listen.ok()) return listen;
  if (!flags.grpc_listen.empty()) {
    std::string host;
    int port = 0;
    auto grpc = ParseHostPort("--grpc-listen", flags.grpc_listen, &host, &port);
    if (!grpc.ok()) return grpc;
  }
  return flags;
}

absl::StatusOr<broker::BrokerOptions> BrokerOptionsFromFlags(const RouterFlags& flags) {
  broker::BrokerOptions options;
  options.endpoint = flags.workers;
  options.insecure_workers = flags.insecure_workers;
  if (!flags.curve_key.empty()) {
    broker::CurveServerOptions curve;
    auto secret = ReadCurveSecretKeyFile(flags.curve_key);
    if (!secret.ok()) return secret.status();
    curve.secret_key_z85 = std::move(*secret);
    auto allowed = broker::ReadWorkerAllowListFile(flags.worker_keys);
    if (!allowed.ok()) return allowed.status();
    curve.workers = std::move(*allowed);
    options.curve = std::move(curve);
  }
  return options;
}

}  // namespace gantry::router
