// gantry-sandbox: runs tool calls (ToolCall in, ToolResult out over ZeroMQ) in fresh
// bubblewrap sandboxes. See docs/sandbox.md and sandbox-svc/tool_service.h.
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "common/log.h"
#include "sandbox-svc/command_rules_yaml.h"
#include "sandbox-svc/tool_service.h"

namespace {

volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

constexpr char kUsage[] =
    "Usage: gantry-sandbox [--endpoint EP] [--workers N] [--queue N] [--rules FILE ...]\n"
    "                      [--fallback-uid UID] [--fallback-gid GID]\n"
    "  --endpoint EP   ZeroMQ endpoint to bind (default tcp://127.0.0.1:5570)\n"
    "  --workers N     calls run in parallel (default 4)\n"
    "  --queue N       calls waiting at most (default 64; then queue_full)\n"
    "  --rules FILE    a command rule set (YAML, docs/sandbox.md); repeatable, selected\n"
    "                  by ToolGrant.exec_rules == its name; exec is denied without one\n"
    "  --fallback-uid/--fallback-gid  ids for workspaces owned by root (default 65534)\n";

}  // namespace

int main(int argc, char** argv) {
  gantry::InitLogging("sandbox");
  gantry::sandbox::SandboxOptions sandbox_options;
  gantry::sandbox::ToolServiceOptions service_options;
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
    } else if (a == "--rules") {
      auto rules = gantry::sandbox::LoadCommandRulesFile(v);
      if (!rules.ok()) {
        std::fprintf(stderr, "gantry-sandbox: %s\n", std::string(rules.status().message()).c_str());
        return 1;
      }
      sandbox_options.rule_sets.push_back(*std::move(rules));
    } else {
      std::fprintf(stderr, "gantry-sandbox: bad option %s %s\n%s", a.c_str(), v.c_str(), kUsage);
      return 2;
    }
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
