// Gateway::MetricsText: the router's Prometheus text (docs/router.md, "Metrics").
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "router/gateway.h"

namespace gantry::router {

namespace {

// A Prometheus label value: backslash, double quote and newline escaped.
std::string LabelValue(absl::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

// Each LIVE worker's KV cache, as its last READY or HEARTBEAT said.
void AppendWorkerKvMetrics(const std::vector<broker::WorkerKv>& workers, std::string* out) {
  struct Series {
    const char* name;
    const char* type;
    const char* help;
    double (*value)(const broker::WorkerKv&);
  };
  const Series series[] = {
      {"gantry_worker_kv_cache_usage_perc", "gauge",
       "Fraction of the worker's KV cache blocks held by running sequences (0 to 1; vLLM's kv_cache_usage_perc).",
       [](const broker::WorkerKv& kv) { return kv.blocks ? double(kv.blocks_in_use) / kv.blocks : 0.0; }},
      {"gantry_worker_kv_cache_blocks", "gauge", "Blocks of the worker's KV cache pool.",
       [](const broker::WorkerKv& kv) { return double(kv.blocks); }},
      {"gantry_worker_kv_cache_blocks_cached", "gauge",
       "KV blocks no sequence holds that keep a released prefix for reuse (evictable).",
       [](const broker::WorkerKv& kv) { return double(kv.blocks_cached); }},
      {"gantry_worker_kv_cache_block_tokens", "gauge", "Positions one KV block holds.",
       [](const broker::WorkerKv& kv) { return double(kv.block_tokens); }},
      {"gantry_worker_preemptions_total", "counter",
       "Sequences the worker preempted because its KV cache pool ran short.",
       [](const broker::WorkerKv& kv) { return double(kv.preemptions); }},
  };
  for (const Series& m : series) {
    absl::StrAppend(out, "# HELP ", m.name, " ", m.help, "\n# TYPE ", m.name, " ", m.type, "\n");
    for (const broker::WorkerKv& w : workers) {
      absl::StrAppend(out, m.name, "{model=\"", LabelValue(w.model), "\",worker_id=\"", LabelValue(w.worker_id),
                      "\"} ", m.value(w), "\n");
    }
  }
  absl::StrAppend(out, "# HELP gantry_worker_kv_cache_bytes Bytes of the worker's KV cache pool, by how it keeps ",
                  "keys and values (f16, q8_0).\n# TYPE gantry_worker_kv_cache_bytes gauge\n");
  for (const broker::WorkerKv& w : workers) {
    absl::StrAppend(out, "gantry_worker_kv_cache_bytes{model=\"", LabelValue(w.model), "\",worker_id=\"",
                    LabelValue(w.worker_id), "\",type=\"", LabelValue(w.type), "\"} ", w.bytes, "\n");
  }
}

}  // namespace

std::string Gateway::MetricsText() const {
  broker::BrokerStats s = options_.broker->stats();
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help, uint64_t value) {
    absl::StrAppend(&out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n", name,
                    " ", value, "\n");
  };
  metric("gantry_router_live_workers", "gauge", "Workers in state LIVE.", s.live_workers);
  metric("gantry_router_queued_requests", "gauge", "Requests waiting in admission queues.", s.queued);
  metric("gantry_router_inflight_requests", "gauge", "Requests dispatched to workers.", s.in_flight);
  metric("gantry_router_dispatched_total", "counter", "Requests sent to workers.", s.dispatched);
  metric("gantry_router_dispatched_by_prefix_total", "counter",
         "Requests sent to the worker that served their conversation's previous turn.", s.dispatched_by_prefix);
  metric("gantry_router_workers_expired_total", "counter", "Workers declared EXPIRED.",
         s.workers_expired);
  metric("gantry_router_dropped_frames_total", "counter", "Worker frames dropped.",
         s.dropped_frames);
  metric("gantry_router_rejected_queue_full_total", "counter", "Requests refused: queue_full.",
         s.rejected_queue_full);
  metric("gantry_router_rejected_no_worker_total", "counter", "Requests refused: no_worker.",
         s.rejected_no_worker);
  metric("gantry_router_worker_handshakes_admitted_total", "counter",
         "CURVE handshakes the ZAP handler admitted (0 without CURVE).", s.handshakes_admitted);
  metric("gantry_router_worker_handshakes_refused_total", "counter",
         "CURVE handshakes the ZAP handler refused: unknown key or malformed.",
         s.handshakes_refused);
  if (options_.policy_reload_errors) {
    metric("gantry_policy_reload_errors_total", "counter",
           "Policy reloads refused (the previous policy stayed in force).",
           options_.policy_reload_errors());
  }
  AppendWorkerKvMetrics(options_.broker->WorkerKvUse(), &out);
  out += metrics_.Text();
  absl::StrAppend(&out, "# HELP gantry_policy_info The policy snapshot in force.\n",
                  "# TYPE gantry_policy_info gauge\n", "gantry_policy_info{sha256=\"",
                  options_.policy()->sha256, "\"} 1\n");
  return out;
}

}  // namespace gantry::router
