// Start-to-exit latency of `cat` on a small file through gantry-sandbox's service
// (ZeroMQ REQ -> ROUTER -> command rules from a policy -> fresh sandbox -> ToolResult),
// with the exec supervisor on (as deployed) and off, called alternately, and, side by
// side, the same `cat` spawned directly without isolation (the peer baseline). Prints p50/p99 of each, their ratio and the load average. Run as root for
// the full isolation path:
//   bazel --output_base=$HOME/.cache/bazel-sandbox run -c opt //sandbox-svc:sandbox_bench -- [N]
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "absl/strings/str_cat.h"
#include "common/zmq_io.h"
#include "policy/policy_loader.h"
#include "sandbox-svc/tool_service.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

// The 1-minute load average ("?" when unreadable): the figures are only comparable
// between runs on an equally quiet machine.
std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one;
  return in >> one ? one : "?";
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * (v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// Spawns cat directly, reads its output, waits: the same work without isolation.
double DirectCatMs(const std::string& file) {
  auto start = Clock::now();
  int p[2];
  if (pipe(p) != 0) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, p[1], 1);
  posix_spawn_file_actions_addclose(&fa, p[0]);
  char* argv[] = {const_cast<char*>("/usr/bin/cat"), const_cast<char*>(file.c_str()), nullptr};
  pid_t pid;
  int rc = posix_spawn(&pid, "/usr/bin/cat", &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(p[1]);
  char buf[4096];
  while (read(p[0], buf, sizeof(buf)) > 0) {
  }
  close(p[0]);
  if (rc == 0) waitpid(pid, nullptr, 0);
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::max(10, std::atoi(argv[1])) : 200;
  const std::string load_before = LoadAverage();
  char dir_template[] = "/tmp/gantry-bench-XXXXXX";
  char* dir = mkdtemp(dir_template);
  if (dir == nullptr) return 1;
  chmod(dir, 0755);
  const std::string ws = dir;
  std::ofstream(ws + "/small.txt") << "a small file\n";

  // The rules as the service gets them: from an access policy, principal "bench".
  auto policy = gantry::policy::LoadPolicyText(
      "version: 1\n"
      "defaults: {budgets: {tokens_per_day: 1, tokens_per_month: 1, requests_per_minute: 1,"
      " concurrent_requests: 1}}\n"
      "models: []\n"
      "principals:\n"
      "  service_accounts:\n"
      "    - {name: bench, key_sha256: " + std::string(63, '0') + "1, priority: batch}\n"
      "grants:\n"
      "  - service_account: bench\n"
      "    commands:\n"
      "      - {executable: /usr/bin/cat, operands: {globs: [\"/workspace/**\"]}}\n",
      "bench.yaml");
  if (!policy.ok()) return 1;
  // Two services, the exec supervisor on (as deployed) and off, called alternately.
  gantry::sandbox::SandboxOptions options;
  options.policy = [snapshot = *policy] { return snapshot; };
  gantry::sandbox::Sandbox sandbox(options);
  options.supervise_exec = false;
  gantry::sandbox::Sandbox unsupervised(options);
  // Each on its own Unix socket; this process's uid is the caller "bench".
  gantry::sandbox::ToolServiceOptions service_options;
  service_options.workers = 1;
  service_options.peer_uids = {{geteuid(), "bench"}};
  service_options.endpoint = absl::StrCat("ipc:///tmp/gantry-bench-", getpid(), "-on.sock");
  gantry::sandbox::ToolService service(sandbox, service_options);
  service_options.endpoint = absl::StrCat("ipc:///tmp/gantry-bench-", getpid(), "-off.sock");
  gantry::sandbox::ToolService service_off(unsupervised, service_options);
  if (!service.Start().ok() || !service_off.Start().ok()) return 1;

  zmq::context_t context(1);
  zmq::socket_t req(context, zmq::socket_type::req);
  req.set(zmq::sockopt::linger, 0);
  req.connect(service.endpoint());
  zmq::socket_t req_off(context, zmq::socket_type::req);
  req_off.set(zmq::sockopt::linger, 0);
  req_off.connect(service_off.endpoint());
  gantry::v1::ToolCall call;
  call.set_call_id("call_bench");
  call.set_workspace(ws);
  call.mutable_grant()->set_exec_rules("bench");
  call.mutable_exec()->add_argv("cat");
  call.mutable_exec()->add_argv("small.txt");
  const std::string body = call.SerializeAsString();

  std::vector<double> sandboxed, sandboxed_off, direct, decide_us;
  int failures = 0;
  // One call; its time in ms, or -1 when it failed.
  auto call_once = [&](zmq::socket_t& socket, bool supervised) -> double {
    auto start = Clock::now();
    if (!gantry::SendFrames(socket, {body}).ok()) return -1;
    auto frames = gantry::RecvFrames(socket, 30000);
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    gantry::v1::ToolResult r;
    bool ok = frames.ok() && r.ParseFromString(frames->back()) &&
              r.outcome() == gantry::v1::TOOL_RAN && r.stdout() == "a small file\n" &&
              (supervised ? r.execs_size() == 1 && r.execs(0).allowed() : r.execs_size() == 0);
    if (!ok) {
      if (++failures == 1 && frames.ok()) {
        std::fprintf(stderr, "failed call: %s\n", r.ShortDebugString().c_str());
      }
      return -1;
    }
    if (supervised) decide_us.push_back(static_cast<double>(r.execs(0).decide_us()));
    return ms;
  };
  for (int i = 0; i < n + 5; ++i) {
    double on = call_once(req, true);
    double off = call_once(req_off, false);
    if (i < 5) continue;  // warm-up calls
    if (on >= 0) sandboxed.push_back(on);
    if (off >= 0) sandboxed_off.push_back(off);
  }
  for (int i = 0; i < n + 5; ++i) {
    double ms = DirectCatMs(ws + "/small.txt");
    if (i >= 5) direct.push_back(ms);
  }
  service.Stop();
  service_off.Stop();
  if (std::system(("rm -rf '" + ws + "'").c_str()) != 0) std::fprintf(stderr, "cannot remove %s\n", ws.c_str());
  if (sandboxed.empty() || sandboxed_off.empty()) {
    std::fprintf(stderr, "every sandboxed call failed (%d); run as root?\n", failures);
    return 1;
  }
  const double s50 = Percentile(sandboxed, 0.5), s99 = Percentile(sandboxed, 0.99);
  const double d50 = Percentile(direct, 0.5), d99 = Percentile(direct, 0.99);
  std::printf("cat of a small file, %d calls each (root=%s, failures=%d)\n", n,
              geteuid() == 0 ? "yes" : "no", failures);
  std::printf("load average (1 min) before %s, after %s, on %ld cores\n", load_before.c_str(),
              LoadAverage().c_str(), sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("%-34s p50 %8.2f ms   p99 %8.2f ms\n", "through gantry-sandbox (ZeroMQ)", s50, s99);
  std::printf("%-34s p50 %8.2f ms   p99 %8.2f ms\n", "  the same, exec supervisor off",
              Percentile(sandboxed_off, 0.5), Percentile(sandboxed_off, 0.99));
  std::printf("%-34s p50 %8.1f us   p99 %8.1f us\n", "  supervisor's decision per exec",
              Percentile(decide_us, 0.5), Percentile(decide_us, 0.99));
  std::printf("%-34s p50 %8.2f ms   p99 %8.2f ms\n", "direct spawn, no isolation (peer)", d50, d99);
  std::printf("ratio sandboxed/direct              p50 %8.1fx    p99 %8.1fx\n", s50 / d50,
              s99 / d99);
  std::printf("goal: p50 under 15 ms (field test: a Docker container per call, ~700 ms)\n");
  return failures == 0 ? 0 : 1;
}
