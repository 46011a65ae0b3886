// The broker's worker registry (broker_impl.h): a READY checked and bound to its key
// (or refused, logged at most once per kRefusalLogIntervalUs per key), heartbeats,
// expiry, and the live bundles the gateway asks about.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/error_codes.h"
#include "common/log.h"
#include "common/status.h"
#include "common/zmq_io.h"
#include "router/broker/broker_impl.h"

namespace gantry::broker {

using internal::Printable;

namespace {

// A worker's KV report as the router keeps and shows it: the cache type one of the
// worker's names, else "unknown" (a worker's bytes are never echoed into /metrics).
v1::KvCacheUse KnownKv(v1::KvCacheUse kv) {
  if (kv.type() != "f16" && kv.type() != "q8_0") kv.set_type("unknown");
  return kv;
}

constexpr int64_t kRefusalLogIntervalUs = 10'000'000;
constexpr size_t kMaxRefusalLogKeys = 1024;

bool IsLowerHex64(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// What a READY claims beyond the bounds in broker.h: "" when nothing.
std::string ReadyOutOfBounds(const v1::Ready& ready) {
  const v1::BundleIdentity& b = ready.bundle();
  if (ready.worker_id().size() > kMaxWorkerIdBytes) {
    return absl::StrCat("worker_id longer than ", kMaxWorkerIdBytes, " bytes");
  }
  if (b.model().size() > 128) return "bundle.model longer than 128 bytes";
  if (!IsLowerHex64(b.identity_sha256())) {
    return "bundle.identity_sha256 is not 64 lowercase hex digits";
  }
  if (ready.slots() > kMaxWorkerSlots) {
    return absl::StrCat("slots ", ready.slots(), " > ", kMaxWorkerSlots);
  }
  if (b.context_length() > kMaxContextLength) {
    return absl::StrCat("bundle.context_length ", b.context_length(), " > ", kMaxContextLength);
  }
  // An output cap above the context is legal (the gateway reserves at most the room
  // left), but not beyond any context.
  if (b.default_max_tokens() > kMaxContextLength) {
    return absl::StrCat("bundle.default_max_tokens ", b.default_max_tokens(), " > ",
                        kMaxContextLength);
  }
  if (ready.heartbeat_interval_ms() > kMaxReadyHeartbeatIntervalMs) {
    return absl::StrCat("heartbeat_interval_ms ", ready.heartbeat_interval_ms(), " > ",
                        kMaxReadyHeartbeatIntervalMs);
  }
  return "";
}

// The Status of a DISCONNECT that refuses a READY (`worker_not_allowed`,
// `worker_id_taken`, `invalid_request`: docs/protocol.md, "Worker identity").
v1::Status RegistrationRefusal(absl::string_view reason, absl::string_view message) {
  v1::Status out;
  ToProto(ReasonError(reason, message), &out);
  return out;
}

}  // namespace

void Broker::Impl::RefuseReady(const std::string& identity, const v1::Ready& ready,
                               const std::string& user_id, absl::string_view code,
                               absl::string_view why) {
  ++stats_.ready_refused;
  // A refused worker reconnects and tries again: one line per (code, key or worker_id,
  // claim) per kRefusalLogIntervalUs, with the refusals since the last line.
  const std::string who =
      user_id.empty() ? ready.worker_id().substr(0, kMaxWorkerIdBytes) : user_id;
  const std::string log_key =
      absl::StrCat(code, "|", who, "|", ready.bundle().model().substr(0, 128), "|",
                   ready.bundle().identity_sha256().substr(0, 64));
  int64_t refusals = 0;
  if (ThrottledLog(log_key, &refusals)) {
    Log(LogLevel::kWarning, "broker.ready_refused",
        {{"code", std::string(code)}, {"identity", Printable(identity)},
         {"key_fingerprint", user_id.empty() ? "none" : user_id},
         {"worker_id", ready.worker_id().substr(0, kMaxWorkerIdBytes)},
         {"model", ready.bundle().model().substr(0, 128)},
         {"bundle", ready.bundle().identity_sha256().substr(0, 64)},
         {"refusals", absl::StrCat(refusals)}, {"why", std::string(why)}});
  }
  SendRefusal(identity, code, why);
}

void Broker::Impl::SendRefusal(const std::string& identity, absl::string_view code,
                               absl::string_view why) {
  v1::Disconnect d;
  *d.mutable_reason() = RegistrationRefusal(code, why);
  std::vector<std::string> frames = wire::EncodeFrames(d);
  frames.insert(frames.begin(), identity);
  (void)SendFrames(socket_, frames);  // best effort: the peer is not LIVE
}

bool Broker::Impl::ThrottledLog(const std::string& key, int64_t* since) {
  const int64_t now = options_.clock->MonotonicMicros();
  if (refusal_log_.size() >= kMaxRefusalLogKeys && refusal_log_.count(key) == 0) {
    refusal_log_.clear();  // bounded: a flood of distinct keys costs lines, not memory
  }
  RefusalLog& entry = refusal_log_[key];
  ++entry.since_logged;
  if (entry.last_logged_us != 0 && now - entry.last_logged_us < kRefusalLogIntervalUs) {
    return false;
  }
  *since = static_cast<int64_t>(entry.since_logged);
  entry.last_logged_us = now;
  entry.since_logged = 0;
  return true;
}

Broker::Impl::ReadyVerdict Broker::Impl::ClassifyReady(const v1::Ready& ready,
                                                       const std::string& user_id) const {
  // READY is a claim: bounded, checked against the key's grant, and never allowed to
  // displace a LIVE worker.
  if (std::string why = ReadyOutOfBounds(ready); !why.empty()) {
    return {WorkerInput::kReadyOutOfBounds, "protocol_error",
            absl::StrCat("READY out of bounds: ", why)};
  }
  if (auth_) {
    const WorkerGrant* grant = auth_->GrantFor(user_id);
    if (grant == nullptr) {
      return {WorkerInput::kReadyNotAllowed, kWorkerNotAllowed,
              "the connection's key is not in the worker allow-list"};
    }
    if (!GrantPermits(*grant, ready.bundle().model(), ready.bundle().identity_sha256())) {
      return {WorkerInput::kReadyNotAllowed, kWorkerNotAllowed,
              absl::StrCat("the worker allow-list does not let this key serve model '",
                           ready.bundle().model().substr(0, 128), "' with bundle ",
                           ready.bundle().identity_sha256())};
    }
  }
  for (const auto& [other_identity, other] : workers_) {
    // worker_ids are per key: another key's READY cannot hold a name this key serves
    // under (found by a red team: an allowed key for another model registered the real
    // worker's worker_id first and locked it out).
    if (other.worker_id != ready.worker_id() || other.user_id != user_id) continue;
    // A worker that reconnects (a new socket, a new identity) is admitted once its old
    // registration has expired: within `liveness` heartbeat intervals.
    return {WorkerInput::kReadyIdTaken, kWorkerIdTaken,
            absl::StrCat("worker_id '", ready.worker_id(),
                         "' is held by a LIVE worker (identity ", Printable(other_identity), ")")};
  }
  return {WorkerInput::kReadyPermitted, "", ""};
}

void Broker::Impl::Register(const std::string& identity, const v1::Ready& ready,
                            const std::string& user_id) {
  Worker worker;
  worker.identity = identity;
  worker.worker_id = ready.worker_id();
  worker.user_id = user_id;
  worker.bundle = ready.bundle();
  worker.slots = ready.slots();
  worker.kv = KnownKv(ready.kv_cache());
  worker.credit = ready.free_slots();
  worker.last_seen_us = options_.clock->MonotonicMicros();
  workers_[identity] = std::move(worker);
  RefreshBundles();
  Log(LogLevel::kInfo, "broker.worker_state",
      {{"worker_id", ready.worker_id()}, {"identity", Printable(identity)},
       {"from", std::string(WorkerEntryStateName(WorkerEntryState::kUnknown))},
       {"state", std::string(WorkerEntryStateName(WorkerEntryState::kLive))},
       {"model", ready.bundle().model()},
       {"bundle", ready.bundle().identity_sha256()},
       {"slots", absl::StrCat(ready.slots())}});
}

void Broker::Impl::OnHeartbeat(Worker& worker, const v1::Heartbeat& heartbeat) {
  const std::string identity = worker.identity;
  if (heartbeat.has_kv_cache()) worker.kv = KnownKv(heartbeat.kv_cache());
  std::set<std::string> active(heartbeat.active_request_ids().begin(),
                               heartbeat.active_request_ids().end());
  // The worker works on something we do not know (any more): cancel it.
  for (const auto& id : active) {
    if (!worker.in_flight.count(id)) {
      v1::Cancel cancel;
      cancel.set_request_id(id);
      cancel.set_reason("unknown to the router");
      SendTo(identity, cancel);
      if (!workers_.count(identity)) return;
    }
  }
  // Sent but missing from two consecutive heartbeats: lost.
  int64_t on_the_wire = 0;
  std::vector<std::string> lost;
  for (auto& [id, flight] : worker.in_flight) {
    if (active.count(id)) {
      flight.missing_heartbeats = 0;
      continue;
    }
    ++on_the_wire;
    if (++flight.missing_heartbeats >= 2) lost.push_back(id);
  }
  for (const auto& id : lost) {
    auto it = worker.in_flight.find(id);
    FailLost(id, it->second,
             WithRetryAfter(ReasonError("worker_lost", "the worker no longer reports this request"),
                            options_.retry_after_ms));
    owner_.erase(id);
    known_ids_.erase(id);
    worker.in_flight.erase(it);
    --on_the_wire;
  }
  // Never more credit than the slots READY announced (within kMaxWorkerSlots).
  const int64_t free_slots = std::min<int64_t>(heartbeat.free_slots(), worker.slots);
  worker.credit = free_slots - std::max<int64_t>(0, on_the_wire);
}

void Broker::Impl::Expire(std::string identity, absl::string_view why) {
  auto it = workers_.find(identity);
  if (it == workers_.end()) return;
  Worker worker = std::move(it->second);
  workers_.erase(it);
  RefreshBundles();
  ++stats_.workers_expired;
  Log(LogLevel::kWarning, "broker.worker_state",
      {{"worker_id", worker.worker_id}, {"identity", Printable(identity)},
       {"from", std::string(WorkerEntryStateName(WorkerEntryState::kLive))},
       {"state", std::string(WorkerEntryStateName(WorkerEntryState::kExpired))},
       {"why", std::string(why)},
       {"in_flight", absl::StrCat(worker.in_flight.size())}});
  for (auto& [id, flight] : worker.in_flight) {
    owner_.erase(id);
    known_ids_.erase(id);
    FailLost(id, flight,
             WithRetryAfter(ReasonError("worker_lost",
                                        absl::StrCat("the worker serving this request was lost: ",
                                                     why)),
                            options_.retry_after_ms));
  }
  FailQueuedIfNoWorker(worker.bundle.model());
}

bool Broker::Impl::HasLiveWorker(const std::string& model) const {
  for (const auto& [identity, worker] : workers_) {
    if (worker.bundle.model() == model) return true;
  }
  return false;
}

size_t Broker::Impl::FreeSlots(const std::string& model) const {
  size_t free = 0;
  for (const auto& [identity, worker] : workers_) {
    if (worker.bundle.model() == model && worker.credit > 0) free += static_cast<size_t>(worker.credit);
  }
  return free;
}

std::optional<v1::BundleIdentity> Broker::Impl::LiveBundle(const std::string& model) const {
  std::lock_guard<std::mutex> lock(bundles_mu_);
  auto it = bundles_.find(model);
  if (it == bundles_.end()) return std::nullopt;
  return it->second;
}

void Broker::Impl::RefreshBundles() {
  std::map<std::string, v1::BundleIdentity> bundles;
  for (const auto& [identity, worker] : workers_) bundles.emplace(worker.bundle.model(), worker.bundle);
  std::lock_guard<std::mutex> lock(bundles_mu_);
  bundles_.swap(bundles);
}

std::vector<std::string> Broker::Impl::LiveModels() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::set<std::string> models;
  for (const auto& [identity, worker] : workers_) models.insert(worker.bundle.model());
  return std::vector<std::string>(models.begin(), models.end());
}

uint32_t Broker::Impl::LiveWorkerCount(const std::string& model) const {
  std::lock_guard<std::mutex> lock(mu_);
  uint32_t n = 0;
  for (const auto& [identity, worker] : workers_) n += worker.bundle.model() == model ? 1 : 0;
  return n;
}

std::vector<WorkerKv> Broker::Impl::WorkerKvUse() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<WorkerKv> out;
  for (const auto& [identity, worker] : workers_) {
    out.push_back({worker.bundle.model(), worker.worker_id, worker.kv.block_tokens(), worker.kv.blocks(),
                   worker.kv.blocks_in_use(), worker.kv.blocks_cached(), worker.kv.preemptions(), worker.kv.bytes(),
                   worker.kv.type()});
  }
  std::sort(out.begin(), out.end(), [](const WorkerKv& a, const WorkerKv& b) { return a.worker_id < b.worker_id; });
  return out;
}

}  // namespace gantry::broker
