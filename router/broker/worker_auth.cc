#include "router/broker/worker_auth.h"

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/curve_keys.h"
#include "common/log.h"
#include "common/zmq_io.h"

namespace gantry::broker {
namespace {

constexpr int64_t kRefusalLogIntervalMs = 10000;
constexpr size_t kMaxRememberedKeys = 1024;

}  // namespace

WorkerAuth::WorkerAuth(zmq::socket_t zap, ZapAllowList allow)
    : zap_(std::move(zap)), allow_(std::move(allow)) {}

absl::StatusOr<std::unique_ptr<WorkerAuth>> WorkerAuth::Install(
    zmq::context_t& context, zmq::socket_t& router, const CurveServerOptions& options) {
  if (!CurveSupported()) {
    return absl::UnimplementedError("this libzmq was built without CURVE support");
  }
  auto secret = DecodeCurveKeyZ85(options.secret_key_z85);
  if (!secret.ok()) return secret.status();
  for (const auto& key : options.allowed_worker_keys_z85) {
    if (auto decoded = DecodeCurveKeyZ85(key); !decoded.ok()) return decoded.status();
  }
  zmq::socket_t zap;
  try {
    zap = zmq::socket_t(context, zmq::socket_type::rep);
    zap.set(zmq::sockopt::linger, 0);
    zap.bind(kZapEndpoint);
    router.set(zmq::sockopt::curve_server, 1);
    router.set(zmq::sockopt::curve_secretkey, *secret);
    router.set(zmq::sockopt::zap_domain, kWorkerZapDomain);
  } catch (const zmq::error_t& e) {
    return absl::UnavailableError(absl::StrCat("CURVE/ZAP setup: ", e.what()));
  }
  Log(LogLevel::kInfo, "broker.curve_enabled",
      {{"allowed_keys", absl::StrCat(options.allowed_worker_keys_z85.size())}});
  return std::unique_ptr<WorkerAuth>(new WorkerAuth(
      std::move(zap), ZapAllowList(kWorkerZapDomain, options.allowed_worker_keys_z85)));
}

void WorkerAuth::AnswerPending() {
  // ZAP requests are a handful of frames; the limits of RecvFrames are ample.
  RecvLimits limits;
  limits.max_frames = 16;
  limits.max_total_bytes = 4096;
  for (int i = 0; i < 100; ++i) {
    auto request = RecvFrames(zap_, 0, limits);
    std::vector<std::string> frames;
    if (request.ok()) {
      frames = std::move(*request);
    } else if (!absl::IsInvalidArgument(request.status())) {
      return;  // nothing waiting (or closed)
    }
    // An oversized request still needs a reply: a REP socket answers every request.
    ZapDecision decision;
    std::vector<std::string> reply = AnswerZapRequest(frames, allow_, &decision);
    (void)SendFrames(zap_, reply);
    Record(decision);
  }
}

void WorkerAuth::Record(const ZapDecision& decision) {
  if (decision.outcome == ZapDecision::Outcome::kAdmitted) {
    ++admitted_;
    Log(LogLevel::kInfo, "broker.worker_admitted",
        {{"key_fingerprint", decision.fingerprint}, {"address", decision.address}});
    return;
  }
  ++refused_;
  const int64_t now = SystemClock().MonotonicMicros() / 1000;
  if (last_logged_.size() > kMaxRememberedKeys) last_logged_.clear();
  auto& [last_ms, since] = last_logged_[decision.fingerprint];
  ++since;
  if (last_ms != 0 && now - last_ms < kRefusalLogIntervalMs) return;
  Log(LogLevel::kWarning, "broker.worker_refused",
      {{"key_fingerprint", decision.fingerprint.empty() ? "none" : decision.fingerprint},
       {"address", decision.address},
       {"why", decision.why},
       {"refusals", absl::StrCat(since)}});
  last_ms = now;
  since = 0;
}

}  // namespace gantry::broker
