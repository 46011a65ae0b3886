#include "sandbox-svc/tool_service.h"

#include "absl/strings/str_cat.h"
#include "common/error_codes.h"
#include "common/log.h"
#include "common/status.h"
#include "common/zmq_io.h"
#include "gantry/v1/tool.pb.h"

namespace gantry::sandbox {
namespace {

constexpr int kPollMs = 100;

std::string ErrorReply(const absl::Status& status, const std::string& call_id) {
  v1::ToolResult r;
  r.set_call_id(call_id);
  r.set_outcome(v1::TOOL_ERROR);
  ToProto(status, r.mutable_error());
  return r.SerializeAsString();
}

}  // namespace

ToolService::ToolService(const Sandbox& sandbox, ToolServiceOptions options)
    : sandbox_(sandbox), options_(std::move(options)), context_(1) {}

ToolService::~ToolService() { Stop(); }

absl::Status ToolService::Start() {
  try {
    router_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::router);
    router_->set(zmq::sockopt::router_mandatory, 1);
    router_->set(zmq::sockopt::linger, 0);
    router_->bind(options_.endpoint);
    bound_ = LastEndpoint(*router_);
  } catch (const zmq::error_t& e) {
    return ReasonError("no_worker", absl::StrCat("cannot bind ", options_.endpoint, ": ", e.what()));
  }
  inproc_ = absl::StrCat("inproc://sandbox-replies-", reinterpret_cast<uintptr_t>(this));
  io_ = std::thread([this] { IoLoop(); });
  active_workers_ = static_cast<int>(std::max<size_t>(options_.workers, 1));
  for (size_t i = 0; i < std::max<size_t>(options_.workers, 1); ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
  }
  Log(LogLevel::kInfo, "sandbox.listening",
      {{"endpoint", bound_}, {"workers", std::to_string(workers_.size())}});
  return absl::OkStatus();
}

void ToolService::Stop() {
  if (stopping_.exchange(true)) return;
  cv_.notify_all();
  for (auto& w : workers_) {
    if (w.joinable()) w.join();
  }
  if (io_.joinable()) io_.join();
}

ToolServiceStats ToolService::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void ToolService::IoLoop() {
  zmq::socket_t replies(context_, zmq::socket_type::pull);
  replies.set(zmq::sockopt::linger, 0);
  replies.bind(inproc_);
  const RecvLimits limits{4, (64u << 20) + 4096};
  for (;;) {
    zmq::pollitem_t items[] = {{router_->handle(), 0, ZMQ_POLLIN, 0},
                               {replies.handle(), 0, ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, 2, std::chrono::milliseconds(kPollMs));
    } catch (const zmq::error_t&) {
      break;
    }
    if (items[1].revents & ZMQ_POLLIN) {
      auto frames = RecvFrames(replies, 0);
      if (frames.ok()) {
        absl::Status sent = SendFrames(*router_, *frames);
        std::lock_guard<std::mutex> lock(mu_);
        if (sent.ok()) ++stats_.replied;
      }
    }
    if (items[0].revents & ZMQ_POLLIN) {
      auto frames = RecvFrames(*router_, 0, limits);
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
      job.envelope = std::move(split->envelope);
      job.body = std::move(split->body);
      if (queue_.size() >= options_.queue_capacity) {
        ++stats_.rejected_queue_full;
        std::vector<std::string> reply = job.envelope;
        reply.push_back(ErrorReply(ReasonError("queue_full", "the sandbox is busy"), ""));
        (void)SendFrames(*router_, reply);
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
    if (!frames.ok()) break;
    (void)SendFrames(*router_, *frames);
  }
  router_.reset();
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
    } else {
      v1::ToolResult result = sandbox_.Run(call);
      Log(LogLevel::kInfo, "sandbox.call_done",
          {{"call_id", call.call_id()},
           {"outcome", v1::ToolOutcome_Name(result.outcome())},
           {"resolved", result.resolved_executable()},
           {"wall_us", std::to_string(result.usage().wall_us())}});
      reply_body = result.SerializeAsString();
    }
    std::vector<std::string> frames = job.envelope;
    frames.push_back(std::move(reply_body));
    for (size_t i = 0; i < frames.size(); ++i) {
      push.send(zmq::buffer(frames[i]),
                i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
  }
}

}  // namespace gantry::sandbox
