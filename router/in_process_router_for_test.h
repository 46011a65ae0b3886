// TEST HELPER: a whole router in this process (policy snapshot, broker on an ephemeral
// tcp port, budgets, gateway, HTTP server on an ephemeral port), wired the way
// gantry-router's main wires it, for tests and benchmarks that need many clients or
// precise timing without a child process. Workers (real or test doubles) connect to
// broker()->endpoint().
//
// Thread-safety: as the parts it holds.
#ifndef GANTRY_ROUTER_IN_PROCESS_ROUTER_FOR_TEST_H_
#define GANTRY_ROUTER_IN_PROCESS_ROUTER_FOR_TEST_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "router/broker/broker.h"
#include "router/budget/budget_tracker.h"
#include "router/fake_worker_for_test.h"
#include "router/gateway.h"
#include "router/http_gateway.h"
#include "router/http/http_server.h"

namespace gantry::router {

// A model entry counted with the tiny byte-level test tokenizer and a ChatML template
// (context 4096), for tests whose subject is not the count.
ModelEntry TinyModelEntryForTest(const std::string& name);

// A policy of four principals, all granted `models` (max_tokens clamped to 100) and
// the tools read_file and list_dir (any arguments) except
// outsider, with roomy budgets: dev (key "k-dev", interactive), ada ("k-ada",
// accessibility), nightly ("k-nightly", batch), outsider ("k-out", interactive, no
// grant: policy_denied).
std::string FourPrincipalsPolicyForTest(const std::vector<std::string>& models);

// A policy with one model `test-model` and one user `dev` (key "k-dev", interactive,
// generous budgets by default): `defaults` replaces the budgets line's keys when given
// (YAML lines under `defaults:`, two-space indented), `grants` is the grants section
// (the grants: line excluded). Without grants, dev gets test-model with no bounds.
std::string OneUserPolicyForTest(const std::string& defaults = "", const std::string& grants = "");

class InProcessRouterForTest {
 public:
  // Errors: the policy's validation errors; UNAVAILABLE when a socket cannot bind.
  // `recorder` (not owned; optional) receives the ledger events, as --ledger's does.
  static absl::StatusOr<std::unique_ptr<InProcessRouterForTest>> Start(
      const std::string& policy_yaml, std::map<std::string, ModelEntry> models,
      http::HttpServerOptions http_options = {}, EventRecorder* recorder = nullptr);
  // Stops the HTTP server first (requests in flight are cancelled), then the broker (what
  // its workers have not answered ends with the usage the router knows), then the rest.
  ~InProcessRouterForTest();

  int port() const { return server_->port(); }
  broker::Broker* broker() const { return broker_.get(); }
  Gateway* gateway() const { return gateway_.get(); }
  const BudgetTracker& budgets() const { return budgets_; }

  // Starts a worker TEST DOUBLE on this router's broker (`options.endpoint` is set to
  // it) and waits, 5 seconds at most, until the broker counts `live_workers` live
  // workers. nullptr when they did not become live in that time.
  std::unique_ptr<gantry::testing::FakeWorkerForTest> StartWorker(
      gantry::testing::FakeWorkerOptions options = {}, int live_workers = 1);

 private:
  InProcessRouterForTest() = default;

  std::shared_ptr<const policy::Snapshot> snapshot_;
  std::unique_ptr<broker::Broker> broker_;
  BudgetTracker budgets_;
  std::unique_ptr<Gateway> gateway_;
  std::unique_ptr<HttpGateway> http_gateway_;
  std::unique_ptr<http::HttpServer> server_;
};

}  // namespace gantry::router

#endif  // GANTRY_ROUTER_IN_PROCESS_ROUTER_FOR_TEST_H_
