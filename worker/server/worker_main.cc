// gantry-worker: serves one pinned bundle to a router over GNTW/1.
//   gantry-worker --bundle DIR --router tcp://HOST:PORT [--slots N] [--threads T]
//                 [--capacity TOKENS] [--kv-memory SIZE] [--kv-cache-type f16|q8_0]
//                 [--script FILE] [--worker-id ID]
//                 [--curve-key FILE --router-key FILE]
// Refuses to start when any pinned hash of the bundle does not match (exit 1, naming
// the file and both hashes). --slots N: requests served at once, in one batch, each
// holding up to --capacity tokens (the bundle's context by default); --kv-memory SIZE
// (bytes, or with K, M or G: KiB, MiB, GiB): the KV cache pool all slots share, at
// least one --capacity (default: every slot's whole capacity); --kv-cache-type: how
// it keeps keys and values, f16 (the default) or q8_0 (about half the bytes, for a
// head dimension that is a multiple of 32; worker/model/kv_cache.h); --threads T: threads
// of the worker's forward pass (the machine's cores by default). --script
// selects the scripted sampler, a test double.
// --curve-key (this worker's secret key, mode 0600) and --router-key (the router's
// public key) make the connection CURVE-encrypted, for a router on another host.
#include <csignal>
#include <cstdio>
#include <algorithm>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "common/log.h"
#include "worker/server/serving.h"
#include "worker/server/worker_loop.h"

namespace {
gantry::server::WorkerLoop* g_loop = nullptr;

// "4G", "512M", "64K" (binary multiples) or bytes.
bool ParseSize(std::string v, size_t* out) {
  uint64_t scale = 1;
  if (!v.empty()) {
    const char unit = v.back();
    if (unit == 'K' || unit == 'k') scale = uint64_t{1} << 10;
    if (unit == 'M' || unit == 'm') scale = uint64_t{1} << 20;
    if (unit == 'G' || unit == 'g') scale = uint64_t{1} << 30;
    if (scale > 1) v.pop_back();
  }
  uint64_t n = 0;
  if (!absl::SimpleAtoi(v, &n) || n == 0 || n > (uint64_t{1} << 50) / scale) return false;
  *out = static_cast<size_t>(n * scale);
  return true;
}

void OnSignal(int) {
  if (g_loop) g_loop->Stop();
}
}  // namespace

int main(int argc, char** argv) {
  gantry::InitLogging("worker");
  std::string bundle_dir, script, curve_key, router_key;
  bool threads_set = false;
  gantry::server::WorkerOptions options;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "gantry-worker: %s needs a value\n", a.c_str());
      return 2;
    }
    std::string v = argv[++i];
    bool ok = true;
    if (a == "--bundle") bundle_dir = v;
    else if (a == "--router") options.router_endpoint = v;
    else if (a == "--script") script = v;
    else if (a == "--worker-id") options.worker_id = v;
    else if (a == "--curve-key") curve_key = v;
    else if (a == "--router-key") router_key = v;
    else if (a == "--slots") ok = absl::SimpleAtoi(v, &options.slots) && options.slots > 0 && options.slots <= 64;
    else if (a == "--threads") ok = (threads_set = true) && absl::SimpleAtoi(v, &options.threads) && options.threads > 0 && options.threads <= 256;
    else if (a == "--capacity") ok = absl::SimpleAtoi(v, &options.capacity_per_slot) && options.capacity_per_slot > 0;
    else if (a == "--kv-memory") ok = ParseSize(v, &options.kv_bytes);
    else if (a == "--kv-cache-type") ok = gantry::model::ParseKvType(v, &options.kv_type);
    else if (a == "--drain-seconds") {
      int seconds = 0;
      ok = absl::SimpleAtoi(v, &seconds) && seconds >= 0 && seconds <= 3600;
      options.drain_timeout_ms = seconds * 1000;
    }
    else ok = false;
    if (!ok) {
      std::fprintf(stderr, "gantry-worker: bad option %s %s\n", a.c_str(), v.c_str());
      return 2;
    }
  }
  if (bundle_dir.empty() || options.router_endpoint.empty()) {
    std::fprintf(stderr, "usage: gantry-worker --bundle DIR --router ENDPOINT [--slots N] "
                         "[--threads T] [--capacity TOKENS] [--kv-memory SIZE] [--kv-cache-type f16|q8_0]\n"
                         "       [--script FILE] [--worker-id ID]\n"
                         "       [--drain-seconds S (30: on SIGTERM, how long answers in flight may take)]\n"
                         "       [--curve-key FILE --router-key FILE]\n");
    return 2;
  }
  if (curve_key.empty() != router_key.empty()) {
    std::fprintf(stderr, "gantry-worker: --curve-key and --router-key go together\n");
    return 2;
  }
  if (!curve_key.empty()) {
    auto keys = gantry::ReadCurveClientKeys(curve_key, router_key);
    if (!keys.ok()) {
      std::fprintf(stderr, "gantry-worker: %s\n", keys.status().ToString().c_str());
      return 1;
    }
    options.curve = std::move(*keys);
  }
  auto loaded = gantry::server::LoadedBundle::Load(bundle_dir, script);
  if (!loaded.ok()) {
    gantry::Log(gantry::LogLevel::kError, "worker.refused", {{"error", loaded.status().ToString()}});
    std::fprintf(stderr, "gantry-worker: refusing to serve: %s\n", loaded.status().ToString().c_str());
    return 1;
  }
  if (!threads_set) {
    // The machine's cores, for the one forward pass all slots share.
    options.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  const auto& identity = (*loaded)->serving().identity;
  // Each slot holds the bundle's whole context unless --capacity asks for less.
  const int context = static_cast<int>(identity.context_length());
  options.capacity_per_slot =
      options.capacity_per_slot > 0 ? std::min(options.capacity_per_slot, context) : context;
  const auto& config = (*loaded)->serving().model->config();
  if (absl::Status kv = gantry::model::KvPool::Supports(config, options.kv_type); !kv.ok()) {
    std::fprintf(stderr, "gantry-worker: --kv-cache-type %s: %s\n", gantry::model::KvTypeName(options.kv_type),
                 std::string(kv.message()).c_str());
    return 2;
  }
  const int blocks = gantry::server::Engine::KvBlocks(config, options.capacity_per_slot, options.slots,
                                                      options.kv_bytes, options.kv_type);
  const size_t pool_bytes = static_cast<size_t>(blocks) * gantry::model::KvPool::BlockBytes(config, options.kv_type);
  if (options.kv_bytes > 0 && options.kv_bytes < pool_bytes) {
    std::fprintf(stderr,
                 "gantry-worker: --kv-memory %zu bytes holds less than one sequence of %d tokens; give at least "
                 "%zu bytes (%zu MiB), or a smaller --capacity\n",
                 options.kv_bytes, options.capacity_per_slot, pool_bytes, (pool_bytes + (1 << 20) - 1) >> 20);
    return 2;
  }
  gantry::Log(gantry::LogLevel::kInfo, "worker.kv_cache",
              {{"blocks", std::to_string(blocks)},
               {"block_tokens", std::to_string(gantry::model::KvPool::kBlockTokens)},
               {"bytes", std::to_string(pool_bytes)},
               {"type", gantry::model::KvTypeName(options.kv_type)},
               {"tokens", std::to_string(int64_t{blocks} * gantry::model::KvPool::kBlockTokens)}});
  gantry::Log(gantry::LogLevel::kInfo, "worker.bundle.verified",
              {{"model", identity.model()}, {"identity_sha256", identity.identity_sha256()},
               {"scripted", script.empty() ? "false" : "true"}});
  gantry::server::WorkerLoop loop(options, (*loaded)->serving());
  g_loop = &loop;
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  loop.Run();
  g_loop = nullptr;
  return 0;
}
