#include "router/in_process_router_for_test.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "policy/policy_loader.h"
#include "tokenizer-svc/tokenizer/tiny_tokenizers.h"

namespace gantry::router {

std::string OneUserPolicyForTest(const std::string& defaults, const std::string& grants) {
  return absl::StrCat(
      "version: 1\ndefaults:\n",
      defaults.empty() ? "  budgets: {tokens_per_day: 1000000, tokens_per_month: 10000000, "
                         "requests_per_minute: 1000, concurrent_requests: 10}\n"
                       : defaults,
      "models:\n  - {name: test-model, bundles: [test-bundle]}\nprincipals:\n  users:\n"
      "    - {name: dev, key_sha256: ", Sha256Hex("k-dev"), ", priority: interactive}\n"
      "grants:\n",
      grants.empty() ? "  - user: dev\n    models:\n      test-model: {}\n" : grants);
}

ModelEntry TinyModelEntryForTest(const std::string& name) {
  ModelEntry entry;
  entry.name = name;
  entry.context_length = 4096;
  auto counter = MakePromptCounter(
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
      "<|im_start|>assistant\n",
      tokenizer::TinyByteLevelTokenizerJson(), "");
  if (counter.ok()) entry.counter = *counter;
  return entry;
}

std::string FourPrincipalsPolicyForTest(const std::vector<std::string>& models) {
  std::string yaml = R"(version: 1
defaults:
  budgets: {tokens_per_day: 10000000, tokens_per_month: 100000000, requests_per_minute: 10000, concurrent_requests: 100}
models:
)";
  std::string granted;
  for (const auto& model : models) {
    absl::StrAppend(&yaml, "  - {name: ", model, ", bundles: [", model, "-bundle]}\n");
    absl::StrAppend(&granted, "      ", model, ": {max_tokens: {max: 100, action: clamp}}\n");
  }
  yaml += "principals:\n  users:\n";
  const std::pair<const char*, const char*> users[] = {
      {"dev", "interactive"}, {"ada", "accessibility"}, {"outsider", "interactive"}};
  for (const auto& [name, priority] : users) {
    std::string key = std::string(name) == "outsider" ? "k-out" : absl::StrCat("k-", name);
    absl::StrAppend(&yaml, "    - {name: ", name, ", key_sha256: ", Sha256Hex(key),
                    ", priority: ", priority, "}\n");
  }
  absl::StrAppend(&yaml, "  service_accounts:\n    - {name: nightly, key_sha256: ",
                  Sha256Hex("k-nightly"), ", priority: batch}\ngrants:\n");
  for (const char* who : {"user: dev", "user: ada", "service_account: nightly"}) {
    absl::StrAppend(&yaml, "  - ", who, "\n    models:\n", granted,
                    "    tools: {read_file: {}, list_dir: {}}\n");
  }
  return yaml;
}

absl::StatusOr<std::unique_ptr<InProcessRouterForTest>> InProcessRouterForTest::Start(
    const std::string& policy_yaml, std::map<std::string, ModelEntry> models,
    http::HttpServerOptions http_options, EventRecorder* recorder) {
  std::unique_ptr<InProcessRouterForTest> router(new InProcessRouterForTest());
  auto snapshot = policy::LoadPolicyText(policy_yaml, "test-policy.yaml");
  if (!snapshot.ok()) return snapshot.status();
  router->snapshot_ = *snapshot;
  broker::BrokerOptions broker_options;
  broker_options.endpoint = "tcp://127.0.0.1:*";
  broker_options.insecure_workers = true;  // plain loopback tcp: a test's own workers
  auto broker = broker::Broker::Start(broker_options);
  if (!broker.ok()) return broker.status();
  router->broker_ = std::move(*broker);
  GatewayOptions options;
  InProcessRouterForTest* r = router.get();
  options.policy = [r] { return r->snapshot_; };
  options.models = std::move(models);
  options.broker = router->broker_.get();
  options.budgets = &router->budgets_;
  options.recorder = recorder;
  router->gateway_ = std::make_unique<Gateway>(std::move(options));
  router->http_gateway_ = std::make_unique<HttpGateway>(router->gateway_.get());
  // As gantry-router does; a test may pass its own.
  if (!http_options.run_on_loop) http_options.run_on_loop = &HttpGateway::AnswersWithoutBlocking;
  if (!http_options.on_headers) {
    http_options.on_headers = [r](const http::HttpRequest& head, std::string* key) {
      return r->http_gateway_->CheckHead(head, key);
    };
  }
  auto server = http::HttpServer::Start(
      std::move(http_options),
      [r](http::HttpRequest request, std::shared_ptr<http::ResponseWriter> writer) {
        r->http_gateway_->Handle(std::move(request), std::move(writer));
      });
  if (!server.ok()) return server.status();
  router->server_ = std::move(*server);
  return router;
}

std::unique_ptr<gantry::testing::FakeWorkerForTest> InProcessRouterForTest::StartWorker(
    gantry::testing::FakeWorkerOptions options, int live_workers) {
  options.endpoint = broker_->endpoint();
  auto worker = std::make_unique<gantry::testing::FakeWorkerForTest>(std::move(options));
  const bool live = worker->WaitFor(
      [&] { return broker_->stats().live_workers == static_cast<uint64_t>(live_workers); }, 5000);
  return live ? std::move(worker) : nullptr;
}

InProcessRouterForTest::~InProcessRouterForTest() {
  server_.reset();
  // Ends what is still in flight (a cancel's Terminal may still be on its way from the
  // worker) while the gateway is there to record it.
  broker_->Stop();
  gateway_.reset();
  broker_.reset();
}

}  // namespace gantry::router
