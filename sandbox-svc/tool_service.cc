#include "sandbox-svc/tool_service.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/curve_keys.h"
#include "common/error_codes.h"
#include "common/log.h"
#include "common/status.h"
#include "common/zap_handler.h"
#include "common/zmq_io.h"
#include "gantry/v1/tool.pb.h"

namespace gantry::sandbox {
namespace {

constexpr int kPollMs = 100;
constexpr int64_t kRefusalLogIntervalMs = 10000;
constexpr size_t kMaxRememberedPeers = 4096;

std::string ErrorReply(const absl::Status& status, const std::string& call_id) {
  v1::ToolResult r;
  r.set_call_id(call_id);
  r.set_outcome(v1::TOOL_ERROR);
  ToProto(status, r.mutable_error());
  return r.SerializeAsString();
}

// The call id of a serialized ToolCall (field 1, the last one wins as in a full parse),
// without parsing the rest: a refused peer's body is not worth more. "" if none.
std::string CallIdOf(const std::string& body) {
  using google::protobuf::internal::WireFormatLite;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(body.data()),
                                            static_cast<int>(body.size()));
  std::string id;
  for (uint32_t tag = in.ReadTag(); tag != 0; tag = in.ReadTag()) {
    if (tag == WireFormatLite::MakeTag(1, WireFormatLite::WIRETYPE_LENGTH_DELIMITED)) {
      uint32_t size = 0;
      if (!in.ReadVarint32(&size) || size > 256 || !in.ReadString(&id, static_cast<int>(size))) {
        return "";
      }
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      break;
    }
  }
  return id;
}

// The uid libzmq appended to an ipc connection's Peer-Address ("localhost:UID:GID:PID",
// from SO_PEERCRED); false when the address does not end in three numbers.
bool PeerUid(const std::string& peer_address, uid_t* uid, std::string* pid) {
  std::vector<std::string> parts = absl::StrSplit(peer_address, ':');
  if (parts.size() < 4) return false;
  const size_t n = parts.size();
  uint32_t u = 0, g = 0, p = 0;
  for (size_t i = n - 3; i < n; ++i) {
    if (parts[i].empty() || parts[i].find_first_not_of("0123456789") != std::string::npos) {
      return false;
    }
  }
  if (!absl::SimpleAtoi(parts[n - 3], &u) || !absl::SimpleAtoi(parts[n - 2], &g) ||
      !absl::SimpleAtoi(parts[n - 1], &p)) {
    return false;
  }
  *uid = u;
  *pid = parts[n - 1];
  return true;
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Whether a service answers on the Unix socket at `path`.
bool SocketAnswers(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path, path.data(), path.size());
  const bool live = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return live;
}

}  // namespace

ToolService::ToolService(const Sandbox& sandbox, ToolServiceOptions options)
    : sandbox_(sandbox), options_(std::move(options)), context_(1) {}

ToolService::~ToolService() { Stop(); }

absl::Status ToolService::BindIpc() {
  if (!absl::StartsWith(options_.endpoint, "ipc:///")) {
    return ReasonError("invalid_request",
                       absl::StrCat("the endpoint must be ipc:// and an absolute path (tcp needs "
                                    "CURVE: curve_endpoint), got ", options_.endpoint));
  }
  socket_path_ = options_.endpoint.substr(6);
  if (socket_path_.size() >= sizeof(sockaddr_un{}.sun_path)) {
    return ReasonError("invalid_request", "the socket path is longer than 107 bytes");
  }
  struct stat st;
  if (lstat(socket_path_.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return ReasonError("no_worker", absl::StrCat(socket_path_, " exists and is not a socket"));
    }
    if (SocketAnswers(socket_path_)) {
      return ReasonError("no_worker", absl::StrCat(socket_path_, " is in use by a running service"));
    }
  }
  const std::string dir = socket_path_.substr(0, socket_path_.rfind('/'));
  if (!dir.empty() && mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return ReasonError("no_worker", absl::StrCat("cannot create ", dir, ": ", strerror(errno)));
  }
  // Created 0600 (libzmq binds in this thread), then opened up as configured: the file
  // is never more open than `socket_mode`.
  const mode_t old_mask = umask(0177);
  try {
    SeedRouterIdentities();
    ipc_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::router);
    ipc_->set(zmq::sockopt::router_mandatory, 1);
    ipc_->set(zmq::sockopt::maxmsgsize, int64_t{64 << 20} + 4096);  // = IoLoop's RecvLimits
    ipc_->set(zmq::sockopt::linger, 0);
    ipc_->bind(options_.endpoint);
  } catch (const zmq::error_t& e) {
    umask(old_mask);
    ipc_.reset();
    return ReasonError("no_worker", absl::StrCat("cannot bind ", options_.endpoint, ": ", e.what()));
  }
  umask(old_mask);
  bound_ = LastEndpoint(*ipc_);
  if (lstat(socket_path_.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode) ||
      (options_.socket_gid != static_cast<gid_t>(-1) &&
       chown(socket_path_.c_str(), static_cast<uid_t>(-1), options_.socket_gid) != 0) ||
      chmod(socket_path_.c_str(), options_.socket_mode & 0777) != 0) {
    return ReasonError("no_worker", absl::StrCat("cannot set the mode and group of ", socket_path_,
                                                 ": ", strerror(errno)));
  }
  socket_ino_ = st.st_ino;
  return absl::OkStatus();
}

absl::Status ToolService::BindCurve() {
  if (!absl::StartsWith(options_.curve_endpoint, "tcp://")) {
    return ReasonError("invalid_request",
                       absl::StrCat("the CURVE endpoint must be tcp://, got ", options_.curve_endpoint));
  }
  if (!CurveSupported()) return absl::UnimplementedError("libzmq has no CURVE support");
  GANTRY_RETURN_IF_ERROR(DecodeCurveKeyZ85(options_.curve_secret_z85).status());
  for (const auto& [key, principal] : options_.peer_keys) {
    auto bytes = DecodeCurveKeyZ85(key);
    if (!bytes.ok()) {
      return ReasonError("invalid_request", absl::StrCat("peer key: ", bytes.status().message()));
    }
    fingerprint_principal_[CurveKeyFingerprint(*bytes)] = principal;
    allowed_keys_.push_back(key);
  }
  try {
    zap_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::rep);
    zap_->set(zmq::sockopt::linger, 0);
    zap_->bind(kZapEndpoint);
    curve_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::router);
    curve_->set(zmq::sockopt::router_mandatory, 1);
    curve_->set(zmq::sockopt::maxmsgsize, int64_t{64 << 20} + 4096);  // = IoLoop's RecvLimits
    curve_->set(zmq::sockopt::linger, 0);
    curve_->set(zmq::sockopt::curve_server, 1);
    curve_->set(zmq::sockopt::curve_secretkey, options_.curve_secret_z85);
    curve_->set(zmq::sockopt::zap_domain, kSandboxZapDomain);
    curve_->bind(options_.curve_endpoint);
  } catch (const zmq::error_t& e) {
    curve_.reset();
    zap_.reset();
    return ReasonError("no_worker",
                       absl::StrCat("cannot bind ", options_.curve_endpoint, ": ", e.what()));
  }
  curve_bound_ = LastEndpoint(*curve_);
  return absl::OkStatus();
}

absl::Status ToolService::Start() {
  if (options_.endpoint.empty() && options_.curve_endpoint.empty()) {
    return ReasonError("invalid_request", "no endpoint to serve");
  }
  for (const auto& [uid, principal] : options_.peer_uids) {
    if (principal.empty()) return ReasonError("invalid_request", absl::StrCat("uid ", uid, ": empty principal"));
  }
  for (const auto& [key, principal] : options_.peer_keys) {
    if (principal.empty()) return ReasonError("invalid_request", "a peer key has an empty principal");
  }
  if (!options_.endpoint.empty()) GANTRY_RETURN_IF_ERROR(BindIpc());
  if (!options_.curve_endpoint.empty()) {
    if (absl::Status s = BindCurve(); !s.ok()) {
      ipc_.reset();
      return s;
    }
  }
  inproc_ = absl::StrCat("inproc://sandbox-replies-", reinterpret_cast<uintptr_t>(this));
  io_ = std::thread([this] { IoLoop(); });
  active_workers_ = static_cast<int>(std::max<size_t>(options_.workers, 1));
  for (size_t i = 0; i < std::max<size_t>(options_.workers, 1); ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
  }
  Log(LogLevel::kInfo, "sandbox.listening",
      {{"endpoint", bound_},
       {"curve_endpoint", curve_bound_},
       {"peer_uids", absl::StrCat(options_.peer_uids.size())},
       {"peer_keys", absl::StrCat(options_.peer_keys.size())},
       {"workers", std::to_string(workers_.size())}});
  if (options_.peer_uids.empty() && options_.peer_keys.empty()) {
    Log(LogLevel::kWarning, "sandbox.no_peers", {{"why", "every call will be refused"}});
  }
  return absl::OkStatus();
}

void ToolService::Stop() {
  if (stopping_.exchange(true)) return;
  cv_.notify_all();
  for (auto& w : workers_) {
    if (w.joinable()) w.join();
  }
  if (io_.joinable()) io_.join();
  ipc_.reset();
  curve_.reset();
  zap_.reset();
  struct stat st;
  if (!socket_path_.empty() && lstat(socket_path_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) &&
      st.st_ino == socket_ino_) {
    unlink(socket_path_.c_str());
  }
}

ToolServiceStats ToolService::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void ToolService::Identify(int socket, const std::string& peer_address,
                           const std::string& user_id, Job* job) const {
  if (socket == 0) {
    uid_t uid = 0;
    std::string pid;
    if (!PeerUid(peer_address, &uid, &pid)) {
      job->peer = absl::StrCat("unknown (", peer_address.substr(0, 64), ")");
      return;
    }
    job->peer = absl::StrCat("uid ", uid, " pid ", pid);
    auto it = options_.peer_uids.find(uid);
    if (it != options_.peer_uids.end()) job->principal = it->second;
    return;
  }
  // CURVE: the ZAP handler admitted only listed keys and named each by its fingerprint.
  job->peer = absl::StrCat("key ", user_id.substr(0, 64), " at ", peer_address.substr(0, 64));
  auto it = fingerprint_principal_.find(user_id);
  if (it != fingerprint_principal_.end()) job->principal = it->second;
}

void ToolService::LogRefusal(const std::string& peer, const std::string& why,
                             const std::string& call_id) {
  const int64_t now = NowMs();
  if (refusal_log_.size() > kMaxRememberedPeers) refusal_log_.clear();
  auto& [last_ms, since] = refusal_log_[peer];
  ++since;
  if (last_ms != 0 && now - last_ms < kRefusalLogIntervalMs) return;
  Log(LogLevel::kWarning, "sandbox.peer_refused",
      {{"peer", peer},
       {"reason", "sandbox_peer_unknown"},
       {"why", why},
       {"call_id", call_id},
       {"refusals", absl::StrCat(since)}});
  last_ms = now;
  since = 0;
}

void ToolService::AnswerZap() {
  const RecvLimits limits{16, 64 << 10};
  for (;;) {
    auto request = RecvFrames(*zap_, 0, limits);
    if (!request.ok()) return;
    ZapAllowList allow(kSandboxZapDomain, allowed_keys_);
    ZapDecision decision;
    (void)SendFrames(*zap_, AnswerZapRequest(*request, allow, &decision));
    if (decision.outcome != ZapDecision::Outcome::kAdmitted) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.refused_handshakes;
      }
      LogRefusal(absl::StrCat("key ", decision.fingerprint.empty() ? "none" : decision.fingerprint,
                              " at ", decision.address),
                 decision.why, "");
    }
  }
}

void ToolService::IoLoop() {
  zmq::socket_t replies(context_, zmq::socket_type::pull);
  replies.set(zmq::sockopt::linger, 0);
  replies.bind(inproc_);
  const RecvLimits limits{4, (64u << 20) + 4096};
  zmq::socket_t* sockets[2] = {ipc_.get(), curve_.get()};
  // Poll items: the replies, then each socket that exists; at[i]: the item of socket i
  // (0 and 1: the ROUTERs, 2: ZAP), -1 when absent.
  std::vector<zmq::pollitem_t> items = {{replies.handle(), 0, ZMQ_POLLIN, 0}};
  int at[3] = {-1, -1, -1};
  zmq::socket_t* polled[3] = {ipc_.get(), curve_.get(), zap_.get()};
  for (int i = 0; i < 3; ++i) {
    if (polled[i] == nullptr) continue;
    at[i] = static_cast<int>(items.size());
    items.push_back({polled[i]->handle(), 0, ZMQ_POLLIN, 0});
  }
  auto ready = [&](int i) { return at[i] >= 0 && (items[at[i]].revents & ZMQ_POLLIN) != 0; };
  for (;;) {
    for (auto& item : items) item.revents = 0;
    try {
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(kPollMs));
    } catch (const zmq::error_t&) {
      break;
    }
    if (ready(2)) AnswerZap();
    if (items[0].revents & ZMQ_POLLIN) {
      auto frames = RecvFrames(replies, 0);
      if (frames.ok() && !frames->empty()) {
        zmq::socket_t* to = sockets[(*frames)[0] == "1" ? 1 : 0];
        frames->erase(frames->begin());
        absl::Status sent = SendFrames(*to, *frames);
        std::lock_guard<std::mutex> lock(mu_);
        if (sent.ok()) ++stats_.replied;
      }
    }
    for (int s = 0; s < 2; ++s) {
      if (!ready(s)) continue;
      RecvMetadata meta;
      auto frames = RecvFrames(*sockets[s], 0, limits, &meta);
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.received;
      auto split = frames.ok() ? SplitRouterEnvelope(*std::move(frames))
                               : absl::StatusOr<RouterEnvelope>(frames.status());
      if (!split.ok()) {
        ++stats_.dropped_malformed;
        Log(LogLevel::kWarning, "sandbox.frame_dropped",
            {{"why", std::string(split.status().message())}});
        continue;
      }
      Job job;
      job.socket = s;
      job.envelope = std::move(split->envelope);
      job.body = std::move(split->body);
      Identify(s, meta.peer_address, meta.user_id, &job);
      if (job.principal.empty()) {
        // Nothing of the call is looked at beyond its id; nothing runs.
        ++stats_.refused_peer;
        const std::string call_id = CallIdOf(job.body);
        std::vector<std::string> reply = job.envelope;
        reply.push_back(ErrorReply(
            ReasonError("sandbox_peer_unknown",
                        absl::StrCat("the sandbox admits no principal for ", job.peer)),
            call_id));
        (void)SendFrames(*sockets[s], reply);
        LogRefusal(job.peer, "no principal is mapped to this peer", call_id);
        continue;
      }
      if (queue_.size() >= options_.queue_capacity) {
        ++stats_.rejected_queue_full;
        std::vector<std::string> reply = job.envelope;
        reply.push_back(ErrorReply(ReasonError("queue_full", "the sandbox is busy"), ""));
        (void)SendFrames(*sockets[s], reply);
        continue;
      }
      queue_.push_back(std::move(job));
      cv_.notify_one();
    }
    if (stopping_.load() && active_workers_.load() == 0) break;
  }
  // Every worker has pushed its last reply before it counted itself out.
  for (;;) {
    auto frames = RecvFrames(replies, 0);
    if (!frames.ok() || frames->empty()) break;
    zmq::socket_t* to = sockets[(*frames)[0] == "1" ? 1 : 0];
    frames->erase(frames->begin());
    (void)SendFrames(*to, *frames);
  }
}

void ToolService::WorkerLoop() {
  zmq::socket_t push(context_, zmq::socket_type::push);
  push.set(zmq::sockopt::linger, 1000);
  push.connect(inproc_);
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_.load() || !queue_.empty(); });
      if (queue_.empty()) {
        --active_workers_;
        return;
      }
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    v1::ToolCall call;
    std::string reply_body;
    if (!call.ParseFromString(job.body)) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.answered_malformed;
      }
      Log(LogLevel::kWarning, "sandbox.call_malformed", {{"bytes", std::to_string(job.body.size())}});
      reply_body = ErrorReply(ReasonError("protocol_error", "the body is not a ToolCall"), "");
    } else if (!call.grant().exec_rules().empty() && call.grant().exec_rules() != job.principal) {
      // Fail closed: the caller asked for another principal's command rules.
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.refused_principal;
      }
      Log(LogLevel::kWarning, "sandbox.principal_refused",
          {{"peer", job.peer},
           {"principal", job.principal},
           {"requested", call.grant().exec_rules().substr(0, 128)},
           {"call_id", call.call_id()}});
      reply_body = ErrorReply(
          ReasonError("sandbox_principal_mismatch",
                      absl::StrCat("the call names principal '", call.grant().exec_rules().substr(0, 128),
                                   "' but its caller is '", job.principal, "'")),
          call.call_id());
    } else {
      call.mutable_grant()->set_exec_rules(job.principal);
      v1::ToolResult result = sandbox_.Run(call);
      Log(LogLevel::kInfo, "sandbox.call_done",
          {{"call_id", call.call_id()},
           {"principal", job.principal},
           {"peer", job.peer},
           {"outcome", v1::ToolOutcome_Name(result.outcome())},
           {"error", result.error().reason()},
           {"resolved", result.resolved_executable()},
           {"wall_us", std::to_string(result.usage().wall_us())}});
      reply_body = result.SerializeAsString();
    }
    std::vector<std::string> frames = {job.socket == 1 ? "1" : "0"};
    frames.insert(frames.end(), job.envelope.begin(), job.envelope.end());
    frames.push_back(std::move(reply_body));
    for (size_t i = 0; i < frames.size(); ++i) {
      push.send(zmq::buffer(frames[i]),
                i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
  }
}

}  // namespace gantry::sandbox
