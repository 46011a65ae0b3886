// gantry-sandbox: runs tool calls (ToolCall in, ToolResult out over ZeroMQ) in fresh
// bubblewrap sandboxes. See docs/sandbox.md and sandbox-svc/tool_service.h.
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "common/log.h"
#include "policy/policy_reloader.h"
#include "sandbox-svc/tool_service.h"

namespace {

volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

constexpr char kUsage[] =
    "Usage: gantry-sandbox [--endpoint EP] [--workers N] [--queue N] [--policy FILE]\n"
    "                      [--fallback-uid UID] [--fallback-gid GID]\n"
    "  --endpoint EP   ZeroMQ endpoint to bind (default tcp://127.0.0.1:5570)\n"
    "  --workers N     calls run in parallel (default 4)\n"
    "  --queue N       calls waiting at most (default 64; then queue_full)\n"
    "  --policy FILE   the access policy (docs/policy.md); ToolGrant.exec_rules names the\n"
    "                  principal whose command grants decide exec; reloaded when the file\n"
    "                  changes or on SIGHUP. Without it every exec is denied\n"
    "  --fallback-uid/--fallback-gid  ids for workspaces owned by root (default 65534)\n";

}  // namespace

int main(int argc, char** argv) {
  gantry::InitLogging("sandbox");
  gantry::sandbox::SandboxOptions sandbox_options;
  gantry::sandbox::ToolServiceOptions service_options;
  std::unique_ptr<gantry::policy::PolicyReloader> policy;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "gantry-sandbox: %s needs a value\n%s", a.c_str(), kUsage);
      return 2;
    }
    std::string v = argv[++i];
    uint32_t n = 0;
    if (a == "--endpoint") {
      service_options.endpoint = v;
    } else if (a == "--workers" && absl::SimpleAtoi(v, &n) && n > 0) {
      service_options.workers = n;
    } else if (a == "--queue" && absl::SimpleAtoi(v, &n) && n > 0) {
      service_options.queue_capacity = n;
    } else if (a == "--fallback-uid" && absl::SimpleAtoi(v, &n)) {
      sandbox_options.fallback_uid = n;
    } else if (a == "--fallback-gid" && absl::SimpleAtoi(v, &n)) {
      sandbox_options.fallback_gid = n;
    } else if (a == "--policy" && policy == nullptr) {
      auto loaded = gantry::policy::PolicyReloader::Create(v);
      if (!loaded.ok()) {
        std::fprintf(stderr, "gantry-sandbox: %s\n", loaded.status().ToString().c_str());
        return 1;
      }
      policy = *std::move(loaded);
    } else {
      std::fprintf(stderr, "gantry-sandbox: bad option %s %s\n%s", a.c_str(), v.c_str(), kUsage);
      return 2;
    }
  }
  if (policy != nullptr) {
    // Without the watcher the policy loaded at start stays in force; say so and go on.
    if (auto status = policy->StartWatching(); !status.ok()) {
      gantry::Log(gantry::LogLevel::kWarning, "sandbox.policy_watch_failed",
                  {{"error", status.ToString()}});
    }
    (void)policy->InstallSighupHandler();
    gantry::policy::PolicyReloader* reloader = policy.get();
    sandbox_options.policy = [reloader] { return reloader->Current(); };
  }
  gantry::sandbox::Sandbox sandbox(sandbox_options);
  gantry::sandbox::ToolService service(sandbox, service_options);
  if (auto status = service.Start(); !status.ok()) {
    std::fprintf(stderr, "gantry-sandbox: %s\n", status.ToString().c_str());
    return 1;
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  service.Stop();
  gantry::Log(gantry::LogLevel::kInfo, "sandbox.stopped");
  return 0;
}
