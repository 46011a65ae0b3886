#include "router/router_flags.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <set>

#include "common/curve_keys.h"
#include "common/status.h"
#include "gtest/gtest.h"

namespace gantry::router {
namespace {

std::vector<std::string> Base(std::vector<std::string> more = {}) {
  std::vector<std::string> args = {"--policy", "p.yaml", "--models", "m.json"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

std::string Error(const std::vector<std::string>& args) {
  auto flags = ParseRouterFlags(args);
  return flags.ok() ? "" : std::string(flags.status().message());
}

TEST(RouterFlags, DefaultsAndValues) {
  auto flags = ParseRouterFlags(Base({"--listen", "0.0.0.0:8443", "--insecure-workers",
                                      "--tls-cert", "c.pem", "--tls-key", "k.pem"}));
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->http_host, "0.0.0.0");
  EXPECT_EQ(flags->http_port, 8443);
  EXPECT_TRUE(flags->insecure_workers);
  EXPECT_EQ(flags->workers, "ipc:///run/gantry/workers.sock");
  EXPECT_EQ(flags->tls_cert, "c.pem");
  EXPECT_EQ(flags->grpc_listen, "");  // gRPC is off unless asked for
  flags = ParseRouterFlags(Base({"--grpc-listen", "127.0.0.1:50051"}));
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->grpc_listen, "127.0.0.1:50051");
}

TEST(RouterFlags, Refusals) {
  EXPECT_NE(Error(Base({"--bogus", "x"})).find("unknown flag --bogus"), std::string::npos);
  EXPECT_NE(Error(Base({"--workers"})).find("--workers needs a value"), std::string::npos);
  EXPECT_NE(Error({"--models", "m.json"}).find("--policy and --models"), std::string::npos);
  EXPECT_NE(Error(Base({"--curve-key", "r.key"})).find("go together"), std::string::npos);
  EXPECT_NE(Error(Base({"--worker-keys", "w.allow"})).find("go together"), std::string::npos);
  EXPECT_NE(Error(Base({"--tls-key", "k.pem"})).find("go together"), std::string::npos);
  EXPECT_NE(Error(Base({"--listen", "8080"})).find("HOST:PORT"), std::string::npos);
  EXPECT_NE(Error(Base({"--listen", "h:99999"})).find("HOST:PORT"), std::string::npos);
  EXPECT_NE(Error(Base({"--grpc-listen", "50051"})).find("--grpc-listen 50051: expected"),
            std::string::npos);
  EXPECT_NE(Error(Base({"--budget-sync-ms", "-1"})).find("expected 0 to 60000"),
            std::string::npos);
  EXPECT_NE(Error(Base({"--budget-sync-ms", "fast"})).find("expected 0 to 60000"),
            std::string::npos);
  auto flags = ParseRouterFlags(Base({"--budget-sync-ms", "0"}));
  ASSERT_TRUE(flags.ok());
  EXPECT_EQ(flags->budget_sync_ms, 0);
  EXPECT_EQ(ParseRouterFlags(Base())->budget_sync_ms, 500);
  EXPECT_FALSE(ParseRouterFlags(Base())->insecure_workers);  // plain workers: ipc only
}

TEST(RouterFlags, HelpNeedsNothingElse) {
  for (const char* help : {"--help", "-h"}) {
    auto flags = ParseRouterFlags({help});
    ASSERT_TRUE(flags.ok()) << flags.status();
    EXPECT_TRUE(flags->help);
  }
  EXPECT_FALSE(ParseRouterFlags(Base())->help);
  const std::string usage = RouterUsage();
  for (const char* documented : {"--workers", "--insecure-workers", "--worker-keys", "models=",
                                 "bundles=", "worker_not_allowed", "0700"}) {
    EXPECT_NE(usage.find(documented), std::string::npos) << documented;
  }
}

TEST(RouterFlags, KeyFilesBecomeBrokerOptions) {
  const std::string dir = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  const std::string prefix = dir + "/router_" + std::to_string(getpid());
  auto router_keys = GenerateCurveKeyPair();
  auto worker_keys = GenerateCurveKeyPair();
  ASSERT_TRUE(WriteCurveKeyPair(prefix, *router_keys).ok());
  const std::string bundle(64, 'a');
  std::ofstream(prefix + ".allow") << "# one worker\n"
                                   << worker_keys->public_z85 << " models=qwen3 bundles=" << bundle
                                   << "\n";

  auto flags = ParseRouterFlags(Base({"--workers", "tcp://10.1.2.3:5555", "--curve-key",
                                      prefix + ".key", "--worker-keys", prefix + ".allow"}));
  ASSERT_TRUE(flags.ok()) << flags.status();
  auto options = BrokerOptionsFromFlags(*flags);
  ASSERT_TRUE(options.ok()) << options.status();
  ASSERT_TRUE(options->curve.has_value());
  EXPECT_EQ(options->curve->secret_key_z85, router_keys->secret_z85);
  ASSERT_EQ(options->curve->workers.size(), 1u);
  EXPECT_EQ(options->curve->workers[0].key_z85, worker_keys->public_z85);
  EXPECT_EQ(options->curve->workers[0].models, std::set<std::string>{"qwen3"});
  EXPECT_EQ(options->curve->workers[0].bundles, std::set<std::string>{bundle});
  EXPECT_FALSE(options->insecure_workers);
  EXPECT_TRUE(BrokerOptionsFromFlags(*ParseRouterFlags(Base({"--insecure-workers"})))
                  ->insecure_workers);

  // A bare key (the older format) would serve anything: refused, naming the line.
  std::ofstream(prefix + ".bare") << "# one worker\n" << worker_keys->public_z85 << "\n";
  flags->worker_keys = prefix + ".bare";
  auto bare = BrokerOptionsFromFlags(*flags);
  EXPECT_EQ(ReasonOf(bare.status()), "invalid_key_file");
  EXPECT_NE(bare.status().message().find("line 2"), absl::string_view::npos) << bare.status();

  flags->worker_keys = prefix + ".missing";
  EXPECT_TRUE(absl::IsNotFound(BrokerOptionsFromFlags(*flags).status()));
  flags->worker_keys = prefix + ".allow";
  ASSERT_EQ(chmod((prefix + ".key").c_str(), 0644), 0);
  EXPECT_EQ(ReasonOf(BrokerOptionsFromFlags(*flags).status()), "invalid_key_file");
}

}  // namespace
}  // namespace gantry::router
