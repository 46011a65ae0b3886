// gantry-router's command line (docs/router.md): parsing and checking of the flags, and
// the key files they name turned into broker options. Kept out of router_main.cc so
// that main only wires, and so that a test can check every refusal.
//
// Thread-safety: plain functions and values.
#ifndef GANTRY_ROUTER_ROUTER_FLAGS_H_
#define GANTRY_ROUTER_ROUTER_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "router/broker/broker.h"

namespace gantry::router {

struct RouterFlags {
  std::string listen = "127.0.0.1:8080";
  // Where workers connect. Without CURVE only ipc:// in a directory only this user can
  // open is accepted, unless `insecure_workers` (router/broker/broker.h).
  std::string workers = "ipc:///run/gantry/workers.sock";
  std::string policy_path;
  std::string models_path;
  std::string ledger_url;
  std::string spool_dir = "/var/lib/gantry/spool";
  // The ledger key (ledger/ledger_key.h); "": $GANTRY_LEDGER_KEY, else
  // $GANTRY_HOME/ledger.key. The --ledger URL names the writer role, never the owner.
  std::string ledger_key;
  std::string curve_key;       // the router's CURVE secret key file
  std::string worker_keys;     // allow-list: worker public keys, what each may serve
  bool insecure_workers = false;  // plain workers on any endpoint (a warning at start)
  bool help = false;              // --help / -h: print RouterUsage(), nothing else parsed
  std::string tls_cert;        // PEM certificate chain for the HTTP listener
  std::string tls_key;         // PEM private key
  // The gRPC Gateway listener (router/grpc_gateway.h), HOST:PORT; "" (default): off.
  // TLS with the same --tls-cert / --tls-key when given.
  std::string grpc_listen;
  // With --ledger: budgets and rates shared with the other routers of that database
  // every this many ms (router/budget/budget_sync.h); 0: this router's counts only.
  std::string budget_sync_ms_text = "500";
  int budget_sync_ms = 500;
  // Parsed from `listen`.
  std::string http_host;
  int http_port = 0;
};

// The usage text (stdout with --help; stderr, exit status 2, after a refusal).
const char* RouterUsage();

// `args` without the program name. With --help or -h anywhere before a refusal: flags
// with only `help` set.
// Errors: INVALID_ARGUMENT naming the flag: unknown flag, missing value, --policy or
// --models missing, --curve-key without --worker-keys (or the reverse), --tls-cert
// without --tls-key (or the reverse), --listen or --grpc-listen not HOST:PORT,
// --budget-sync-ms not an integer from 0 to 60000.
absl::StatusOr<RouterFlags> ParseRouterFlags(const std::vector<std::string>& args);

// The broker's options: endpoint, CURVE keys read from the files (ReadCurveSecretKeyFile,
// broker::ReadWorkerAllowListFile: each key with the models and bundles it may serve),
// and whether plain workers are accepted on any endpoint (--insecure-workers; otherwise
// only on ipc:// in a private directory, checked by Broker::Start).
// Errors: those of the key readers (invalid_key_file, NOT_FOUND).
absl::StatusOr<broker::BrokerOptions> BrokerOptionsFromFlags(const RouterFlags& flags);

}  // namespace gantry::router

#endif  // GANTRY_ROUTER_ROUTER_FLAGS_H_
