#include "router/grpc_gateway.h"

#include <grpcpp/alarm.h>
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <pthread.h>
#include <grpcpp/impl/codegen/proto_utils.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/error_codes.h"
#include "common/file.h"
#include "common/log.h"
#include "common/status.h"
#include "common/thread_pool.h"
#include "gantry/v1/gateway.pb.h"
#include "grpc/health/v1/health.pb.h"
#include "policy/policy_decide.h"
#include "router/broker/broker.h"
#include "router/gateway.h"
#include "router/grpc_chat_request.h"
#include "router/http/error_response.h"
#include "router/http/tls.h"

namespace gantry::router {
namespace {

namespace health = grpc::health::v1;

// How often a health Watch looks at the gateway's readiness.
constexpr int kWatchPollMs = 200;

// The methods of the listener, by their HTTP/2 :path. Anything else is UNIMPLEMENTED.
enum class Method { kUnknown, kChat, kListModels, kCancel, kHealthCheck, kHealthWatch };

Method MethodOf(const std::string& path) {
  static const auto* const kPaths = new std::vector<std::pair<std::string, Method>>{
      {"/gantry.v1.Gateway/Chat", Method::kChat},
      {"/gantry.v1.Gateway/ListModels", Method::kListModels},
      {"/gantry.v1.Gateway/Cancel", Method::kCancel},
      {"/grpc.health.v1.Health/Check", Method::kHealthCheck},
      {"/grpc.health.v1.Health/Watch", Method::kHealthWatch},
  };
  for (const auto& [p, m] : *kPaths) {
    if (p == path) return m;
  }
  return Method::kUnknown;
}

// gantry.v1.Gateway's methods need a key; grpc.health.v1.Health is open, like /readyz.
bool NeedsKey(Method m) {
  return m == Method::kChat || m == Method::kListModels || m == Method::kCancel;
}

std::string MetadataValue(const grpc::ServerContextBase& ctx, const char* key) {
  auto it = ctx.client_metadata().find(key);
  if (it == ctx.client_metadata().end()) return "";
  return std::string(it->second.data(), it->second.size());
}

// gRPC metadata values are printable ASCII; anything else becomes '?'.
std::string MetadataSafe(absl::string_view value) {
  std::string out(value);
  for (char& c : out) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return out;
}

// One request message out of the bytes gRPC read (at most max_receive_message_bytes).
template <typename Message>
bool ParseMessage(grpc::ByteBuffer* bytes, Message* out) {
  return grpc::SerializationTraits<Message>::Deserialize(bytes, out).ok();
}

template <typename Message>
grpc::ByteBuffer SerializeMessage(const Message& message) {
  grpc::ByteBuffer bytes;
  bool own_buffer = false;
  grpc::SerializationTraits<Message>::Serialize(message, &bytes, &own_buffer);
  return bytes;
}

class ChatStream;

// Looks again, every kHoldLookMs, at the Chat streams whose Call holds back text of an
// open sentence (accessibility): it is released after a silence, and no event may come
// to make the stream look (Gateway::Call::holding).
class HoldTicker {
 public:
  HoldTicker() : thread_([this] { Run(); }) {}
  ~HoldTicker();
  HoldTicker(const HoldTicker&) = delete;
  HoldTicker& operator=(const HoldTicker&) = delete;
  void Add(std::weak_ptr<ChatStream> stream);

 private:
  static constexpr int kHoldLookMs = 100;
  void Run();
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<std::weak_ptr<ChatStream>> streams_;
  std::thread thread_;  // last: started once the rest is built
};

// What callers hold, counted per key (a principal, or a peer address) and in all: a
// Take past either cap is refused. Used for the calls whose request message is being
// read (one place each) and for the bytes of Chat requests waiting for admission.
class Places {
 public:
  bool Take(const std::string& key, int64_t amount, int64_t per_key, int64_t total) {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t& mine = by_key_[key];
    if (mine + amount > per_key || total_ + amount > total) {
      if (mine == 0) by_key_.erase(key);
      return false;
    }
    mine += amount;
    total_ += amount;
    return true;
  }
  void Give(const std::string& key, int64_t amount) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_key_.find(key);
    if (it == by_key_.end()) return;
    it->second -= amount;
    total_ -= amount;
    if (it->second <= 0) by_key_.erase(it);
  }
  int64_t total() {
    std::lock_guard<std::mutex> lock(mu_);
    return total_;
  }

 private:
  std::mutex mu_;
  std::map<std::string, int64_t> by_key_;
  int64_t total_ = 0;
};

// "ipv4:1.2.3.4:5678" -> "ipv4:1.2.3.4" (a peer's address without its port).
std::string PeerAddress(const std::string& peer) {
  const size_t colon = peer.rfind(':');
  const size_t first = peer.find(':');
  return colon == std::string::npos || colon == first ? peer : peer.substr(0, colon);
}

struct ListenerState {
  Gateway* gateway;
  GrpcGatewayOptions options;
  std::atomic<int> streams{0};   // Chat calls past their authentication
  std::atomic<int> watchers{0};  // health Watch calls
  // Calls whose request message is being read: the Gateway's by principal, the open
  // health service's by peer address, each pool with its own total (a red team: one
  // key's header-only Chat calls filled a shared total and refused every health check).
  Places reading;
  Places health_reading;
  // Bytes of Chat requests read and not yet through Admit, by principal (Admit renders
  // the whole prompt before budgets and rates apply).
  Places admitting;
  HoldTicker ticker;
  // Where Chat calls are checked and admitted (Admit renders and counts the prompt: too
  // long for gRPC's callback threads). CPU work only: twice the cores, then they queue.
  ThreadPool admission{"grpc-admit", 4,
                       std::max<size_t>(4, 2 * std::thread::hardware_concurrency())};
};

class CallReactor;

// The events of one admitted Chat call on their way to its client: shared by the
// call's reactor, the Call's event consumer (run where the events are delivered: the
// broker's thread) and the hold ticker. It writes one message at a time, started by
// whichever of them finds the last write done, so no thread waits for a stream. Its
// states:
//
//   streaming  events are queued and written in order;
//   gone       the client went away (OnCancel, a failed write): the request is
//              cancelled on its worker, what is queued is dropped, and the stream still
//              waits for the Terminal (every admitted request has a recorded outcome);
//   ended      the Terminal was written with the call's end, or (gone) the call ended
//              CANCELLED once the Terminal was taken and no write was in flight. The
//              reactor may be gone from here on: nothing touches it.
class ChatStream : public std::enable_shared_from_this<ChatStream> {
 public:
  ChatStream(CallReactor* reactor, std::unique_ptr<Gateway::Call> call, broker::Broker* broker,
             bool include_usage)
      : reactor_(reactor), broker_(broker), request_id_(call->request_id()),
        include_usage_(include_usage), call_(std::move(call)) {}

  // Queues the admitted event (seq 0) and makes Pump the Call's consumer.
  void Start(HoldTicker* ticker);
  // The Call's consumer (OnEvents: one run at a time, never from two threads at once):
  // takes what the Call has ready (Next(0)); true once its Terminal was taken.
  bool Pump();
  // The hold ticker's look: runs the consumer through the Call's waker (never Pump
  // itself: a Next may run the consumer inline), then whether the Call still holds.
  bool Tick();
  void WriteDone(bool ok);
  void ClientGone();

 private:
  enum class State { kStreaming, kGone, kEnded };
  enum class Action { kNone, kWrite, kWriteLast, kEndCancelled };
  // Under mu_: the next step, taken by Act outside the lock (gRPC may run a reaction
  // inline, and the broker's Cancel may deliver the Terminal at once).
  Action NextLocked();
  void Act(Action action);
  void CancelOnWorker();

  std::mutex mu_;
  CallReactor* const reactor_;
  broker::Broker* const broker_;
  const std::string request_id_;
  const bool include_usage_;
  HoldTicker* ticker_ = nullptr;
  std::function<void()> waker_;          // runs the consumer (set by Start)
  std::unique_ptr<Gateway::Call> call_;  // the consumer's own; until its Terminal is taken
  // Guarded by mu_ from here on.
  State state_ = State::kStreaming;
  std::deque<v1::StreamEvent> outbox_;
  bool terminal_taken_ = false;
  bool writing_ = false;
  bool holding_ = false;  // the Call held text at the consumer's last run
  bool ticking_ = false;  // on the hold ticker's list
  uint64_t seq_ = 0;
  grpc::ByteBuffer in_flight_;  // the message being written
};

// One call, from its initial metadata to its end, in four steps (docs/protocol.md,
// section 7):
//
//   authenticate     only the initial metadata has arrived (gRPC reads no message for a
//                    generic service): the method is looked up, a gantry.v1.Gateway
//                    call's key is checked, the Chat stream or Watch cap is taken. A
//                    refusal here is sent at once: the request message is never read.
//   read             the one request message is read (StartRead).
//   serve            a unary method answers from the read callback. Chat is checked and
//                    admitted on an admission pool thread (Admit renders and counts
//                    the prompt: too long for gRPC's callback threads), then streams as
//                    a ChatStream; Watch waits on a thread of its own.
//   end              Finish (or StartWriteAndFinish) was called and the call's Chat or
//                    Watch place given back; OnDone deletes the reactor once gRPC is done
//                    with it.
//
// Cancellation (the client's cancel, deadline or disconnect, or the server stopping)
// arrives as OnCancel, on any thread.
class CallReactor final : public grpc::ServerGenericBidiReactor {
 public:
  CallReactor(ListenerState* listener, grpc::GenericCallbackServerContext* ctx)
      : listener_(listener), gateway_(listener->gateway), ctx_(ctx),
        method_(MethodOf(ctx->method())), received_us_(gateway_->clock()->UnixMicros()) {
    Authenticate();
  }

  void OnReadDone(bool ok) override {
    read_deadline_.Cancel();
    GiveReadPlace();
    if (!ok) {
      if (read_timed_out_) {
        gateway_->metrics().Error("request_timeout");
        return End(grpc::Status(grpc::StatusCode::CANCELLED,
                                "request_timeout: the request message did not arrive in time"));
      }
      // (OnCancel may come after this read's end: the context knows first.)
      if (Cancelled() || ctx_->IsCancelled()) {
        return End(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
      }
      // The client half-closed without a request message.
      Refuse(ReasonError("invalid_request", "the call carried no request message"));
      return;
    }
    switch (method_) {
      case Method::kChat: {
        // The request's bytes count against its principal until Admit returns: one key
        // cannot queue more than max_admitting_bytes_per_principal of prompts to render.
        const int64_t bytes = std::max<int64_t>(1, static_cast<int64_t>(request_.Length()));
        const GrpcGatewayOptions& o = listener_->options;
        if (!listener_->admitting.Take(principal_, bytes, o.max_admitting_bytes_per_principal,
                                       o.max_admitting_bytes)) {
          return Refuse(WithRetryAfter(
              ReasonError("server_busy", "too many bytes of this principal waiting for admission"),
              1000));
        }
        admitting_bytes_ = bytes;
        auto chat = std::make_unique<v1::ChatRequest>();
        if (!ParseMessage(&request_, chat.get())) return RefuseUnparsed("gantry.v1.ChatRequest");
        request_.Clear();
        std::shared_ptr<v1::ChatRequest> shared(std::move(chat));
        if (!listener_->admission.Run([this, shared] { AdmitChat(*shared); })) {
          Refuse(ReasonError("server_busy", "the gRPC listener is stopping"));
        }
        return;
      }
      case Method::kListModels: {
        v1::ListModelsRequest request;
        if (!ParseMessage(&request_, &request)) return RefuseUnparsed("gantry.v1.ListModelsRequest");
        return Reply(ListModels());
      }
      case Method::kCancel: {
        v1::CancelRequest request;
        if (!ParseMessage(&request_, &request)) return RefuseUnparsed("gantry.v1.CancelRequest");
        v1::CancelResponse response;
        response.set_cancelled(gateway_->CancelOwned(principal_, request.request_id(),
                                                     "cancelled by the client (gRPC Cancel)"));
        return Reply(response);
      }
      case Method::kHealthCheck: {
        health::HealthCheckRequest request;
        if (!ParseMessage(&request_, &request)) return RefuseUnparsed("grpc.health.v1.HealthCheckRequest");
        if (!KnownService(request.service())) {
          return End(grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service"));
        }
        health::HealthCheckResponse response;
        response.set_status(Serving());
        return Reply(response);
      }
      case Method::kHealthWatch: {
        health::HealthCheckRequest request;
        if (!ParseMessage(&request_, &request)) return RefuseUnparsed("grpc.health.v1.HealthCheckRequest");
        try {
          std::thread([this, known = KnownService(request.service())] { ServeWatch(known); })
              .detach();
        } catch (const std::system_error&) {
          End(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "server_busy: no thread"));
        }
        return;
      }
      case Method::kUnknown:
        break;
    }
    End(grpc::Status(grpc::StatusCode::INTERNAL, "unreachable"));
  }

  void OnWriteDone(bool ok) override {
    if (method_ == Method::kChat) return stream_->WriteDone(ok);
    std::lock_guard<std::mutex> lock(mu_);
    write_pending_ = false;
    write_ok_ = ok;
    cv_.notify_all();
  }

  void OnCancel() override {
    std::shared_ptr<ChatStream> stream;
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_ = true;
      stream = stream_;
    }
    if (stream != nullptr) stream->ClientGone();
  }

  // gRPC is done with the call; the reactor goes once the read deadline's alarm has
  // also answered (it always does, fired or cancelled), whichever is last.
  void OnDone() override {
    {
      std::lock_guard<std::mutex> lock(alarm_mu_);
      done_ = true;
    }
    Unref();
  }

  // The end of the call. Nothing may touch the reactor after it: OnDone may delete it
  // on another thread at once.
  void End(const grpc::Status& status) {
    GiveReadPlace();
    GiveAdmittingBytes();
    Release();
    Finish(status);
  }
  // The end with a last message (a unary answer, a stream's Terminal), which must stay
  // unchanged until OnDone.
  void EndWith(const grpc::ByteBuffer* last) {
    Release();
    StartWriteAndFinish(last, grpc::WriteOptions(), grpc::Status::OK);
  }

 private:
  void Authenticate() {
    if (method_ == Method::kUnknown) {
      return End(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                              absl::StrCat("unknown method ", MetadataSafe(ctx_->method()))));
    }
    if (NeedsKey(method_)) {
      snapshot_ = gateway_->policy();
      auto principal = gateway_->AuthenticateKey(*snapshot_, MetadataValue(*ctx_, "authorization"));
      if (!principal.ok()) return Refuse(principal.status());
      principal_ = std::move(*principal);
    }
    if (method_ == Method::kChat) {
      // A Chat call holds a place until its Terminal: only so many at once.
      if (listener_->streams.fetch_add(1) >= listener_->options.max_streams) {
        listener_->streams.fetch_sub(1);
        return Refuse(WithRetryAfter(
            ReasonError("server_busy", "too many gRPC Chat calls on this router"), 1000));
      }
      holds_ = &listener_->streams;
    } else if (method_ == Method::kHealthWatch) {
      // Unauthenticated, and a thread each while it waits: only so many at once.
      if (listener_->watchers.fetch_add(1) >= listener_->options.max_health_watchers) {
        listener_->watchers.fetch_sub(1);
        return End(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                "server_busy: too many health watchers"));
      }
      holds_ = &listener_->watchers;
    }
    // While its message is read, a call holds a read place: per principal for the
    // Gateway's methods, per peer address for the open health service. A message that
    // has not arrived within read_timeout_ms ends the call (its places are given back).
    const GrpcGatewayOptions& o = listener_->options;
    read_key_ = NeedsKey(method_) ? principal_ : PeerAddress(ctx_->peer());
    read_places_ = NeedsKey(method_) ? &listener_->reading : &listener_->health_reading;
    const bool read_place =
        NeedsKey(method_)
            ? read_places_->Take(read_key_, 1, o.max_reads_per_principal, o.max_reads)
            : read_places_->Take(read_key_, 1, o.max_health_reads_per_peer, o.max_health_reads);
    if (!read_place) {
      read_key_.clear();
      if (NeedsKey(method_)) {
        return Refuse(WithRetryAfter(
            ReasonError("server_busy", "too many calls of this principal being read"), 1000));
      }
      return End(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                              "server_busy: too many health calls being read"));
    }
    refs_.fetch_add(1);
    const int read_ms = NeedsKey(method_) ? o.read_timeout_ms : o.health_read_timeout_ms;
    read_deadline_.Set(std::chrono::system_clock::now() + std::chrono::milliseconds(read_ms),
                       [this](bool fired) {
                         {
                           std::lock_guard<std::mutex> lock(alarm_mu_);
                           if (fired && !done_) {
                             read_timed_out_ = true;
                             ctx_->TryCancel();
                           }
                         }
                         Unref();
                       });
    StartRead(&request_);
  }

  // Called once Admit has returned (or the call ends before it), on the one thread that
  // handles the call at that point.
  void GiveAdmittingBytes() {
    if (admitting_bytes_ > 0) listener_->admitting.Give(principal_, admitting_bytes_);
    admitting_bytes_ = 0;
  }

  void GiveReadPlace() {
    std::string key;
    {
      std::lock_guard<std::mutex> lock(mu_);
      key.swap(read_key_);
    }
    if (!key.empty()) read_places_->Give(key, 1);
  }

  void Unref() {
    if (refs_.fetch_sub(1) == 1) delete this;
  }

  // Gives back the Chat or Watch place this call holds.
  void Release() {
    if (holds_ != nullptr) holds_->fetch_sub(1);
    holds_ = nullptr;
  }

  // A refusal: the reason's canonical code (the error table's code is an
  // absl::StatusCode, numerically the gRPC code), "<reason>: <message>", and the reason,
  // retry hint and policy headers as trailing metadata.
  void Refuse(const absl::Status& status, const http::HeaderList& headers = {}) {
    const std::string reason = http::ErrorCodeOf(status);
    gateway_->metrics().Error(reason);
    ctx_->AddTrailingMetadata("x-gantry-error-code", reason);
    if (RetryAfterMs(status) > 0) {
      ctx_->AddTrailingMetadata("x-gantry-retry-after-ms", std::to_string(RetryAfterMs(status)));
    }
    for (const auto& [name, value] : headers) ctx_->AddTrailingMetadata(name, MetadataSafe(value));
    End(grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                     absl::StrCat(reason, ": ", status.message())));
  }
  void RefuseUnparsed(const char* type) {
    Refuse(ReasonError("invalid_request", absl::StrCat("the message is not a ", type)));
  }

  template <typename Message>
  void Reply(const Message& response) {
    response_ = SerializeMessage(response);
    EndWith(&response_);
  }

  v1::ListModelsResponse ListModels() {
    v1::ListModelsResponse response;
    for (const auto& [name, entry] : gateway_->models()) {
      if (!policy::ModelGranted(*snapshot_, principal_, name)) continue;
      std::optional<Gateway::ModelFacts> facts = gateway_->FactsOf(name);
      if (!facts) continue;
      v1::ModelInfo* info = response.add_models();
      info->set_name(name);
      info->set_context_length(facts->context_length);
      info->set_default_max_tokens(facts->default_max_tokens);
      info->set_tool_protocol(facts->tool_protocol);
      info->set_live_workers(gateway_->broker()->LiveWorkerCount(name));
    }
    return response;
  }

  // Chat, on an admission thread: the request check and Admit, then the stream.
  void AdmitChat(const v1::ChatRequest& request) {
    // A client gone while the call waited for this thread is not admitted at all.
    if (Cancelled()) return End(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
    auto checked = CheckGrpcChatRequest(request);
    if (!checked.ok()) return Refuse(checked.status());
    const bool include_usage = checked->include_usage;
    Gateway::ChatInput input;
    input.api = "grpc";
    input.user_agent = MetadataValue(*ctx_, "user-agent");
    input.request = std::move(checked->request);
    input.has_max_tokens = checked->has_max_tokens;
    input.received_us = received_us_;
    // gRPC's "no deadline" is a time point far in the future: only a real one counts.
    const auto deadline = ctx_->deadline();
    if (deadline < std::chrono::system_clock::now() + std::chrono::hours(24 * 366)) {
      input.client_deadline_unix_ms = static_cast<uint64_t>(std::max<int64_t>(
          0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline.time_since_epoch())
                 .count()));
    }
    http::HeaderList headers;
    auto admitted = gateway_->Admit(snapshot_, principal_, std::move(input), &headers);
    GiveAdmittingBytes();
    if (!admitted.ok()) return Refuse(admitted.status(), headers);
    for (const auto& [name, value] : (*admitted)->headers()) {
      ctx_->AddInitialMetadata(name, MetadataSafe(value));
    }
    auto stream = std::make_shared<ChatStream>(this, std::move(*admitted), gateway_->broker(),
                                               include_usage);
    bool cancelled;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stream_ = stream;
      cancelled = cancelled_;
    }
    stream->Start(&listener_->ticker);
    if (cancelled) stream->ClientGone();
  }

  // One Watch message, from its thread; false once the client is gone.
  bool WriteAndWait(const health::HealthCheckResponse& message) {
    response_ = SerializeMessage(message);
    {
      std::lock_guard<std::mutex> lock(mu_);
      write_pending_ = true;
    }
    StartWrite(&response_);  // OnWriteDone may run before it returns
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !write_pending_; });
    return write_ok_ && !cancelled_;
  }

  // Watch, on its own thread: the status at once and again whenever it changes, until
  // the client goes away or the server stops.
  void ServeWatch(bool known) {
    health::HealthCheckResponse::ServingStatus sent = health::HealthCheckResponse::UNKNOWN;
    while (!Cancelled()) {
      health::HealthCheckResponse::ServingStatus now =
          known ? Serving() : health::HealthCheckResponse::SERVICE_UNKNOWN;
      if (now != sent) {
        health::HealthCheckResponse response;
        response.set_status(now);
        if (!WriteAndWait(response)) break;
        sent = now;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(kWatchPollMs));
    }
    End(grpc::Status(grpc::StatusCode::CANCELLED, "the watch ended"));
  }

  bool Cancelled() {
    std::lock_guard<std::mutex> lock(mu_);
    return cancelled_;
  }
  static bool KnownService(const std::string& service) {
    return service.empty() || service == "gantry.v1.Gateway";
  }
  health::HealthCheckResponse::ServingStatus Serving() const {
    return gateway_->Ready().ok() ? health::HealthCheckResponse::SERVING
                                  : health::HealthCheckResponse::NOT_SERVING;
  }

  ListenerState* const listener_;
  Gateway* const gateway_;
  grpc::GenericCallbackServerContext* const ctx_;
  const Method method_;
  const int64_t received_us_;
  std::shared_ptr<const policy::Snapshot> snapshot_;
  std::string principal_;
  std::atomic<int>* holds_ = nullptr;  // the cap this call counts against, if any
  std::string read_key_;               // guarded by mu_; the read place held, if any
  Places* read_places_ = nullptr;      // where read_key_'s place is
  int64_t admitting_bytes_ = 0;        // held in listener_->admitting until Admit returns
  grpc::Alarm read_deadline_;
  std::mutex alarm_mu_;
  bool done_ = false;                  // guarded by alarm_mu_: OnDone came
  std::atomic<bool> read_timed_out_{false};
  std::atomic<int> refs_{1};           // gRPC's OnDone, and the alarm's answer once set
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;  // a unary answer, or the Watch message being written
  std::mutex mu_;
  std::condition_variable cv_;
  bool cancelled_ = false;                // guarded by mu_
  std::shared_ptr<ChatStream> stream_;    // guarded by mu_; set once, after admission
  bool write_pending_ = false;            // guarded by mu_ (Watch)
  bool write_ok_ = true;                  // guarded by mu_ (Watch)
};

void ChatStream::Start(HoldTicker* ticker) {
  Gateway::Call* call;
  Action action;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ticker_ = ticker;
    call = call_.get();
    waker_ = call->Waker();
    v1::StreamEvent first;
    first.set_request_id(request_id_);
    first.set_seq(0);
    first.mutable_admitted()->set_priority(call->priority());
    outbox_.push_back(std::move(first));
    action = NextLocked();
  }
  Act(action);
  // From here Pump may take the Terminal and drop the Call on the broker's thread, even
  // before OnEvents returns.
  call->OnEvents([self = shared_from_this()] { return self->Pump(); });
}

bool ChatStream::Pump() {
  if (call_ == nullptr) return true;
  // Next may do ledger and policy work (DecideOutput, the outcome): not under mu_,
  // which gRPC's reactions take.
  std::vector<v1::StreamEvent> taken;
  bool terminal = false;
  while (std::optional<v1::StreamEvent> event = call_->Next(0)) {
    if (event->has_usage()) continue;  // Terminal.usage is authoritative
    terminal = event->has_terminal();
    taken.push_back(std::move(*event));
    if (terminal) break;
  }
  const bool holding = !terminal && call_->holding();
  // Next returns the Terminal once the outcome is recorded: the Call is done.
  std::unique_ptr<Gateway::Call> finished;
  if (terminal) finished = std::move(call_);
  bool tick = false;
  Action action;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ == State::kStreaming) {
      for (v1::StreamEvent& event : taken) {
        if (event.has_terminal() && include_usage_) {
          v1::StreamEvent usage;
          usage.set_request_id(request_id_);
          usage.set_seq(++seq_);
          *usage.mutable_usage() = event.terminal().usage();
          outbox_.push_back(std::move(usage));
        }
        event.set_seq(++seq_);
        outbox_.push_back(std::move(event));
      }
    }
    terminal_taken_ = terminal_taken_ || terminal;
    holding_ = holding;
    if (holding && !ticking_) tick = ticking_ = true;
    action = NextLocked();
  }
  finished.reset();
  if (tick) ticker_->Add(weak_from_this());
  Act(action);
  return terminal;
}

bool ChatStream::Tick() {
  waker_();
  std::lock_guard<std::mutex> lock(mu_);
  ticking_ = holding_ && !terminal_taken_;
  return ticking_;
}

void ChatStream::WriteDone(bool ok) {
  bool gone = false;
  Action action;
  {
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    if (!ok && state_ == State::kStreaming) {
      state_ = State::kGone;
      outbox_.clear();
      gone = true;
    }
    action = NextLocked();
  }
  if (gone) CancelOnWorker();
  Act(action);
}

void ChatStream::ClientGone() {
  Action action;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ != State::kStreaming) return;
    state_ = State::kGone;
    outbox_.clear();
    action = NextLocked();
  }
  CancelOnWorker();
  Act(action);
}

void ChatStream::CancelOnWorker() {
  // By id, not through the Call (Pump may be dropping it); the broker ignores an id
  // that finished in between.
  broker_->Cancel(request_id_, "the gRPC client went away");
}

ChatStream::Action ChatStream::NextLocked() {
  if (writing_ || state_ == State::kEnded) return Action::kNone;
  if (state_ == State::kGone) {
    if (!terminal_taken_) return Action::kNone;
    state_ = State::kEnded;
    return Action::kEndCancelled;
  }
  if (outbox_.empty()) return Action::kNone;
  const bool last = outbox_.front().has_terminal();
  in_flight_ = SerializeMessage(outbox_.front());
  outbox_.pop_front();
  writing_ = true;
  if (!last) return Action::kWrite;
  // The Terminal goes out with the call's end (one write fewer).
  state_ = State::kEnded;
  return Action::kWriteLast;
}

void ChatStream::Act(Action action) {
  switch (action) {
    case Action::kNone: return;
    case Action::kWrite: return reactor_->StartWrite(&in_flight_);
    case Action::kWriteLast: return reactor_->EndWith(&in_flight_);
    case Action::kEndCancelled:
      return reactor_->End(
          grpc::Status(grpc::StatusCode::CANCELLED, "cancelled: the client went away"));
  }
}

HoldTicker::~HoldTicker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void HoldTicker::Add(std::weak_ptr<ChatStream> stream) {
  std::lock_guard<std::mutex> lock(mu_);
  streams_.push_back(std::move(stream));
  cv_.notify_all();
}

void HoldTicker::Run() {
  pthread_setname_np(pthread_self(), "grpc-hold");  // shown by top -H and perf
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait(lock, [&] { return stop_ || !streams_.empty(); });
    if (cv_.wait_for(lock, std::chrono::milliseconds(kHoldLookMs), [&] { return stop_; })) break;
    std::vector<std::weak_ptr<ChatStream>> looking = std::move(streams_);
    streams_.clear();
    lock.unlock();
    std::vector<std::weak_ptr<ChatStream>> still;
    for (auto& weak : looking) {
      if (std::shared_ptr<ChatStream> stream = weak.lock(); stream && stream->Tick()) {
        still.push_back(std::move(weak));
      }
    }
    lock.lock();
    for (auto& weak : still) streams_.push_back(std::move(weak));
  }
}

// Every call of the listener starts here, with its initial metadata only.
class Listener final : public grpc::CallbackGenericService {
 public:
  Listener(Gateway* gateway, GrpcGatewayOptions options) {
    state_.gateway = gateway;
    state_.options = std::move(options);
  }
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    return new CallReactor(&state_, ctx);
  }
  int CallsBeingRead() {
    return static_cast<int>(state_.reading.total() + state_.health_reading.total());
  }

 private:
  ListenerState state_;
};

}  // namespace

struct GrpcGateway::Impl {
  std::unique_ptr<Listener> listener;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

absl::StatusOr<std::unique_ptr<GrpcGateway>> GrpcGateway::Start(Gateway* gateway,
                                                                GrpcGatewayOptions options) {
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (!options.tls_cert_path.empty() || !options.tls_key_path.empty()) {
    // The same check as the HTTP listener's: readable PEM, and a key that matches.
    auto checked = http::TlsContext::Load(options.tls_cert_path, options.tls_key_path);
    if (!checked.ok()) return checked.status();
    auto cert = ReadFileToString(options.tls_cert_path);
    auto key = ReadFileToString(options.tls_key_path);
    if (!cert.ok() || !key.ok()) {
      return ReasonError("invalid_tls_config", "cannot read the TLS certificate or key");
    }
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({*key, *cert});
    credentials = grpc::SslServerCredentials(ssl);
  }
  auto impl = std::make_unique<Impl>();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, credentials, &impl->port);
  builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_concurrent_streams);
  builder.AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE, 16 << 10);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             options.min_ping_interval_ms);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 2);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 60000);  // the server pings idle peers
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20000);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, options.max_connection_idle_ms);
  // No BDP probing: it grows every stream's window, so a refused call's client could
  // push megabytes before its refusal arrives. A stream whose message is being read
  // still opens its window to that message's size.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  grpc::ResourceQuota quota("gantry-grpc-gateway");
  quota.Resize(options.max_memory_bytes);
  builder.SetResourceQuota(quota);
  impl->listener = std::make_unique<Listener>(gateway, options);
  builder.RegisterCallbackGenericService(impl->listener.get());
  impl->server = builder.BuildAndStart();
  if (impl->server == nullptr || impl->port == 0) {
    return absl::UnavailableError(absl::StrCat("gRPC: cannot listen on ", options.listen));
  }
  return std::unique_ptr<GrpcGateway>(new GrpcGateway(std::move(impl)));
}

GrpcGateway::GrpcGateway(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

GrpcGateway::~GrpcGateway() {
  // Calls still running after the grace period are cancelled; their serving threads see
  // the cancel at their next look, cancel their requests and end; Wait() returns once
  // every call is done.
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  impl_->server->Wait();
}

int GrpcGateway::port() const { return impl_->port; }

int GrpcGateway::calls_being_read() const { return impl_->listener->CallsBeingRead(); }

}  // namespace gantry::router
