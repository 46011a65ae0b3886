// Benchmark: policy decisions per second on a generated 1,000-principal policy.
// Goal (issue 4): p50 under 2 microseconds per decision.
//
//   bazel run -c opt //policy:policy_bench [-- PRINCIPALS DECISIONS]
//
// Prints the load time, decisions/s, and p50/p99 per decision, for requests that name
// the principal (already authenticated) and for requests that present a key (hashed
// with SHA-256 and looked up), for requests offering 12 tools and for one emitted tool
// call (its JSON arguments parsed as the router does), with the SHA-256 alone as the
// reference figure.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "common/sha256.h"
#include "policy/policy_decide.h"
#include "policy/policy_gen.h"
#include "policy/policy_loader.h"

namespace {

using Clock = std::chrono::steady_clock;

int64_t Ns(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count();
}

void Report(const char* name, std::vector<int64_t>& ns, int64_t total_ns) {
  std::sort(ns.begin(), ns.end());
  double per_s = static_cast<double>(ns.size()) * 1e9 / static_cast<double>(total_ns);
  std::printf("%-18s %10.0f decisions/s  p50 %6lld ns  p99 %6lld ns\n", name, per_s,
              static_cast<long long>(ns[ns.size() / 2]),
              static_cast<long long>(ns[ns.size() * 99 / 100]));
}

}  // namespace

int main(int argc, char** argv) {
  using namespace gantry::policy;
  int principals = argc > 1 ? std::atoi(argv[1]) : 1000;
  int decisions = argc > 2 ? std::atoi(argv[2]) : 200000;
  std::mt19937_64 rng(2024);
  // About one grant per principal and a few per group (a user is in ~6 of the 20
  // groups), with explicit denies rare, as in a real policy.
  GeneratedPolicy gen = GeneratePolicy(principals, 20, principals + 60, rng, 2);
  std::string text = gen.Render();

  auto t0 = Clock::now();
  auto snap = LoadPolicyText(text, "bench.yaml");
  auto t1 = Clock::now();
  if (!snap.ok()) {
    std::fprintf(stderr, "%s\n", std::string(snap.status().message()).c_str());
    return 1;
  }
  std::printf("policy: %d principals, 20 groups, %zu grants, %zu bytes, loaded in %.1f ms\n",
              principals, gen.grants.size(), text.size(), Ns(t0, t1) / 1e6);

  for (bool by_key : {false, true}) {
    std::vector<PolicyRequest> requests;
    requests.reserve(4096);
    // The common case at the router: a chat request for a model the principal holds,
    // with ordinary parameters; one in five also carries a tool call or a command. Random models and tools are
    // mostly denied at the first check, which would flatter the figures.
    for (int i = 0; i < 4096; ++i) {
      PolicyRequest r = RandomRequest(gen, by_key, rng);
      const std::string& name = by_key ? r.api_key.substr(4) : r.principal;
      const Principal& p = (*snap)->principals[(*snap)->by_name.at(name)];
      std::vector<std::string> granted;
      for (const auto& [model, access] : p.models) {
        if (!access.grant_rule.empty() && access.deny_rule.empty()) granted.push_back(model);
      }
      if (!granted.empty()) r.model = granted[rng() % granted.size()];
      // Parameters inside the generator's core ranges, clamped now and then.
      r.params = ParamValues{};
      r.params.Set(Param::kMaxTokens, rng() % 4 == 0 ? 20000 : 500 + rng() % 500);
      r.params.Set(Param::kTemperature, 0.5 + (rng() % 50) / 100.0);
      if (rng() % 2) r.params.Set(Param::kTopP, 0.1 + (rng() % 40) / 100.0);
      r.params.Set(Param::kTopK, 10 + rng() % 10);  // omitted, top_k is off: most bounds refuse it
      if (rng() % 5 != 0) {
        r.tools.clear();
        r.commands.clear();
      }
      // As the router decides: omitted parameters as the worker's defaults.
      CompleteAsServed(&r, 1024);
      requests.push_back(std::move(r));
    }
    std::vector<int64_t> ns;
    ns.reserve(decisions);
    size_t counts[3] = {0, 0, 0};
    std::map<std::string, int> reasons;  // over the first pass of the request set
    auto start = Clock::now();
    for (int i = 0; i < decisions; ++i) {
      const PolicyRequest& r = requests[i & 4095];
      auto a = Clock::now();
      Decision d = Decide(**snap, r);
      auto b = Clock::now();
      ++counts[static_cast<int>(d.verdict)];
      if (i < 4096) ++reasons[d.reason];
      ns.push_back(Ns(a, b));
    }
    int64_t total = Ns(start, Clock::now());
    Report(by_key ? "by key (sha256)" : "by principal name", ns, total);
    std::printf("  verdicts: %zu allow, %zu clamp, %zu deny; reasons:", counts[0], counts[2],
                counts[1]);
    for (const auto& [reason, n] : reasons) {
      std::printf(" %s=%d", reason.empty() ? "(allowed)" : reason.c_str(), n);
    }
    std::printf("\n");
  }

  // Tools as coding agents send them: a request offering 12 tools (half of them not
  // granted: stripped), decided as served (omitted parameters as their defaults); and
  // each tool call a model emits, read from its JSON arguments and decided, as
  // Gateway::DecideOutput does for every call.
  {
    std::vector<PolicyRequest> offers;
    std::vector<std::pair<std::string, std::string>> calls;  // principal, tool
    for (int i = 0; i < 4096; ++i) {
      PolicyRequest r = RandomRequest(gen, false, rng);
      const Principal& p = (*snap)->principals[(*snap)->by_name.at(r.principal)];
      for (const auto& [model, access] : p.models) {
        if (!access.grant_rule.empty() && access.deny_rule.empty()) r.model = model;
      }
      r.tools.clear();
      r.commands.clear();
      // What a coding agent sends (Qwen Code: temperature and top_p), in the generator's
      // core ranges; the rest is decided as its defaults.
      r.params = ParamValues{};
      r.params.Set(Param::kMaxTokens, 500 + rng() % 500);
      r.params.Set(Param::kTemperature, 0.7);
      r.params.Set(Param::kTopP, 0.3);
      r.params.Set(Param::kTopK, 15);
      r.params.Set(Param::kParallelToolCalls, 0);
      std::vector<std::string> granted;
      for (const auto& [tool, access] : p.tools) granted.push_back(tool);
      for (int t = 0; t < 12; ++t) {
        r.offered_tools.push_back(t % 2 == 0 && !granted.empty()
                                      ? granted[(t / 2) % granted.size()] + (t / 2 < static_cast<int>(granted.size()) ? "" : "_x")
                                      : "client_tool_" + std::to_string(t));
      }
      std::sort(r.offered_tools.begin(), r.offered_tools.end());
      r.offered_tools.erase(std::unique(r.offered_tools.begin(), r.offered_tools.end()),
                            r.offered_tools.end());
      CompleteAsServed(&r, 1024);
      calls.emplace_back(r.principal, granted.empty() ? "read_file" : granted[rng() % granted.size()]);
      offers.push_back(std::move(r));
    }
    for (bool emitted : {false, true}) {
      std::vector<int64_t> ns;
      ns.reserve(decisions);
      std::map<std::string, int> reasons;
      auto start = Clock::now();
      for (int i = 0; i < decisions; ++i) {
        auto a = Clock::now();
        Decision d;
        if (emitted) {
          PolicyRequest r;
          r.principal = calls[i & 4095].first;
          r.tools.push_back(ToolCallFromJson(calls[i & 4095].second,
                                             R"({"path":"/workspace/a","limit":200})"));
          d = Decide(**snap, r);
        } else {
          d = Decide(**snap, offers[i & 4095]);
        }
        auto b = Clock::now();
        if (i < 4096) ++reasons[d.reason];
        ns.push_back(Ns(a, b));
      }
      int64_t total = Ns(start, Clock::now());
      Report(emitted ? "emitted tool call" : "offers 12 tools", ns, total);
      std::printf("  reasons:");
      for (const auto& [reason, n] : reasons) {
        std::printf(" %s=%d", reason.empty() ? "(allowed)" : reason.c_str(), n);
      }
      std::printf("\n");
    }
  }

  // Reference: the SHA-256 of a key alone, which the by-key figure includes.
  std::vector<int64_t> ns;
  ns.reserve(decisions);
  auto start = Clock::now();
  size_t sink = 0;
  for (int i = 0; i < decisions; ++i) {
    auto a = Clock::now();
    sink += gantry::Sha256Hex("key-u123").size();
    ns.push_back(Ns(a, Clock::now()));
  }
  int64_t total = Ns(start, Clock::now());
  Report("sha256 of a key", ns, total);
  return sink == 0;
}
