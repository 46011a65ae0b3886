#include "router/grpc_gateway.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/error_codes.h"
#include "common/file.h"
#include "common/log.h"
#include "common/status.h"
#include "gantry/v1/gateway.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "policy/policy_decide.h"
#include "router/gateway.h"
#include "router/grpc_chat_request.h"
#include "router/http/error_response.h"
#include "router/http/tls.h"

namespace gantry::router {
namespace {

// Threads of the synchronous server (a Chat call holds one until its Terminal), as many
// as the HTTP server's handler pool may grow to; beyond them gRPC answers
// RESOURCE_EXHAUSTED itself.
constexpr int kMaxThreads = 4096;

std::string MetadataValue(const grpc::ServerContext& ctx, const char* key) {
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

// A refusal before admission: the reason's canonical code (the error table's code is
// an absl::StatusCode, numerically the gRPC code), "<reason>: <message>", and the
// reason, retry hint and policy headers as trailing metadata.
grpc::Status Refuse(Gateway* gateway, grpc::ServerContext* ctx, const absl::Status& status,
                    const http::HeaderList& headers = {}) {
  const std::string reason = http::ErrorCodeOf(status);
  gateway->metrics().Error(reason);
  ctx->AddTrailingMetadata("x-gantry-error-code", reason);
  if (RetryAfterMs(status) > 0) {
    ctx->AddTrailingMetadata("x-gantry-retry-after-ms", std::to_string(RetryAfterMs(status)));
  }
  for (const auto& [name, value] : headers) ctx->AddTrailingMetadata(name, MetadataSafe(value));
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      absl::StrCat(reason, ": ", status.message()));
}

// The longest wait between two looks at a silent stream's client (see Chat).
constexpr int kMaxIdlePollMs = 80;

class GatewayService final : public v1::Gateway::Service {
 public:
  GatewayService(Gateway* gateway, int cancel_poll_ms)
      : gateway_(gateway), poll_ms_(cancel_poll_ms) {}

  grpc::Status Chat(grpc::ServerContext* ctx, const v1::ChatRequest* request,
                    grpc::ServerWriter<v1::StreamEvent>* writer) override {
    const int64_t received_us = gateway_->clock()->UnixMicros();
    std::shared_ptr<const policy::Snapshot> snapshot = gateway_->policy();
    auto principal = gateway_->AuthenticateKey(*snapshot, MetadataValue(*ctx, "authorization"));
    if (!principal.ok()) return Refuse(gateway_, ctx, principal.status());
    auto checked = CheckGrpcChatRequest(*request);
    if (!checked.ok()) return Refuse(gateway_, ctx, checked.status());
    const bool include_usage = checked->include_usage;
    Gateway::ChatInput input;
    input.api = "grpc";
    input.user_agent = MetadataValue(*ctx, "user-agent");
    input.request = std::move(checked->request);
    input.has_max_tokens = checked->has_max_tokens;
    input.received_us = received_us;
    // gRPC's "no deadline" is a time point far in the future: only a real one counts.
    const auto deadline = ctx->deadline();
    if (deadline < std::chrono::system_clock::now() + std::chrono::hours(24 * 366)) {
      input.client_deadline_unix_ms = static_cast<uint64_t>(std::max<int64_t>(
          0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline.time_since_epoch())
                 .count()));
    }
    http::HeaderList headers;
    auto admitted = gateway_->Admit(snapshot, *principal, std::move(input), &headers);
    if (!admitted.ok()) return Refuse(gateway_, ctx, admitted.status(), headers);
    // Destroying the Call before its Terminal cancels the request on the worker: every
    // early return below is a cancel.
    std::unique_ptr<Gateway::Call> call = std::move(*admitted);
    for (const auto& [name, value] : call->headers()) {
      ctx->AddInitialMetadata(name, MetadataSafe(value));
    }
    uint64_t seq = 0;
    v1::StreamEvent first;
    first.set_request_id(call->request_id());
    first.set_seq(seq);
    first.mutable_admitted()->set_priority(call->priority());
    if (!writer->Write(first)) return ClientGone(*call);
    // The client's cancellation is polled: every poll_ms_ while events flow (so a cancel
    // reaches the worker within one decode step), backing off to kMaxIdlePollMs while the
    // request is queued or in prefill, where thousands of waiting streams would
    // otherwise wake 100 times a second each.
    int wait_ms = poll_ms_;
    while (true) {
      if (ctx->IsCancelled()) return ClientGone(*call);
      std::optional<v1::StreamEvent> event = call->Next(wait_ms);
      if (!event) {
        wait_ms = std::min(wait_ms * 2, std::max(poll_ms_, kMaxIdlePollMs));
        continue;
      }
      wait_ms = poll_ms_;
      if (event->has_usage()) continue;  // Terminal.usage is authoritative
      const bool last = event->has_terminal();
      if (last && include_usage) {
        v1::StreamEvent usage;
        usage.set_request_id(call->request_id());
        usage.set_seq(++seq);
        *usage.mutable_usage() = event->terminal().usage();
        if (!writer->Write(usage)) return ClientGone(*call);
      }
      event->set_seq(++seq);
      if (last) {
        // The Terminal goes out with the call's end (one write fewer).
        writer->WriteLast(*event, grpc::WriteOptions());
        return grpc::Status::OK;
      }
      if (!writer->Write(*event)) return ClientGone(*call);
    }
  }

  grpc::Status ListModels(grpc::ServerContext* ctx, const v1::ListModelsRequest*,
                          v1::ListModelsResponse* response) override {
    std::shared_ptr<const policy::Snapshot> snapshot = gateway_->policy();
    auto principal = gateway_->AuthenticateKey(*snapshot, MetadataValue(*ctx, "authorization"));
    if (!principal.ok()) return Refuse(gateway_, ctx, principal.status());
    for (const auto& [name, entry] : gateway_->models()) {
      if (!policy::ModelGranted(*snapshot, *principal, name)) continue;
      std::optional<Gateway::ModelFacts> facts = gateway_->FactsOf(name);
      if (!facts) continue;
      v1::ModelInfo* info = response->add_models();
      info->set_name(name);
      info->set_context_length(facts->context_length);
      info->set_default_max_tokens(facts->default_max_tokens);
      info->set_tool_protocol(facts->tool_protocol);
      info->set_live_workers(gateway_->broker()->LiveWorkerCount(name));
    }
    return grpc::Status::OK;
  }

  grpc::Status Cancel(grpc::ServerContext* ctx, const v1::CancelRequest* request,
                      v1::CancelResponse* response) override {
    auto principal =
        gateway_->AuthenticateKey(*gateway_->policy(), MetadataValue(*ctx, "authorization"));
    if (!principal.ok()) return Refuse(gateway_, ctx, principal.status());
    response->set_cancelled(gateway_->CancelOwned(*principal, request->request_id(),
                                                  "cancelled by the client (gRPC Cancel)"));
    return grpc::Status::OK;
  }

 private:
  // The client cancelled the call, its deadline passed or it disconnected.
  static grpc::Status ClientGone(Gateway::Call& call) {
    call.Cancel("the gRPC client went away");
    return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled: the client went away");
  }

  Gateway* gateway_;
  const int poll_ms_;
};

// grpc.health.v1.Health, unauthenticated like /readyz: the server as a whole ("") and
// gantry.v1.Gateway are SERVING while the gateway is ready (Gateway::Ready: some worker
// is live and the ledger can keep evidence), else NOT_SERVING; any other
// service is unknown (Check: NOT_FOUND, Watch: SERVICE_UNKNOWN).
class HealthService final : public grpc::health::v1::Health::Service {
 public:
  using Status = grpc::health::v1::HealthCheckResponse;

  HealthService(Gateway* gateway, int max_watchers)
      : gateway_(gateway), max_watchers_(max_watchers) {}

  grpc::Status Check(grpc::ServerContext*, const grpc::health::v1::HealthCheckRequest* request,
                     Status* response) override {
    if (!Known(request->service())) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service");
    }
    response->set_status(Current());
    return grpc::Status::OK;
  }

  // Sends the status at once and again whenever it changes (looked at every 200 ms)
  // until the client goes away or the server stops.
  grpc::Status Watch(grpc::ServerContext* ctx,
                     const grpc::health::v1::HealthCheckRequest* request,
                     grpc::ServerWriter<Status>* writer) override {
    // Unauthenticated, and a thread each while it waits: only so many at once.
    if (watchers_.fetch_add(1) >= max_watchers_) {
      watchers_.fetch_sub(1);
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          "server_busy: too many health watchers");
    }
    struct Leave {
      std::atomic<int>* n;
      ~Leave() { n->fetch_sub(1); }
    } leave{&watchers_};
    const bool known = Known(request->service());
    Status::ServingStatus sent = Status::UNKNOWN;
    while (!ctx->IsCancelled()) {
      Status::ServingStatus now = known ? Current() : Status::SERVICE_UNKNOWN;
      if (now != sent) {
        Status response;
        response.set_status(now);
        if (!writer->Write(response)) break;
        sent = now;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return grpc::Status(grpc::StatusCode::CANCELLED, "the watch ended");
  }

 private:
  static bool Known(const std::string& service) {
    return service.empty() || service == v1::Gateway::service_full_name();
  }
  Status::ServingStatus Current() const {
    return gateway_->Ready().ok() ? Status::SERVING : Status::NOT_SERVING;
  }

  Gateway* gateway_;
  const int max_watchers_;
  std::atomic<int> watchers_{0};
};

}  // namespace

struct GrpcGateway::Impl {
  std::unique_ptr<GatewayService> service;
  std::unique_ptr<HealthService> health;
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
  impl->service = std::make_unique<GatewayService>(gateway, options.cancel_poll_ms);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, credentials, &impl->port);
  builder.RegisterService(impl->service.get());
  impl->health = std::make_unique<HealthService>(gateway, options.max_health_watchers);
  builder.RegisterService(impl->health.get());
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
  grpc::ResourceQuota quota("gantry-grpc-gateway");
  quota.SetMaxThreads(kMaxThreads);
  builder.SetResourceQuota(quota);
  impl->server = builder.BuildAndStart();
  if (impl->server == nullptr || impl->port == 0) {
    return absl::UnavailableError(absl::StrCat("gRPC: cannot listen on ", options.listen));
  }
  return std::unique_ptr<GrpcGateway>(new GrpcGateway(std::move(impl)));
}

GrpcGateway::GrpcGateway(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

GrpcGateway::~GrpcGateway() {
  // Calls still running after the grace period are cancelled; their streams see
  // IsCancelled() and cancel their requests.
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  impl_->server->Wait();
}

int GrpcGateway::port() const { return impl_->port; }

}  // namespace gantry::router
