// The OpenAI HTTP API (docs/router.md): one of the gateway's two transports, beside
// gRPC (grpc_gateway.h), over the same pipeline (gateway.h).
//
//   POST /v1/chat/completions and POST /v1/responses (the same pipeline; only the body
//   mapping and the rendering of the result differ)
//     authenticate   Bearer key -> principal (Gateway::AuthenticateKey: SHA-256 of the
//                    key looked up in the policy snapshot, then compared in constant
//                    time)                                            401 unauthenticated
//     parse          OpenAI body -> InferenceRequest (openai/chat_request.h,
//                    openai/responses_request.h)    400 invalid_json / invalid_request
//     admit          Gateway::Admit (policy, model, tools, render + count, context,
//                    budgets, admission); a refusal is its reason's HTTP status
//     stream back    SSE chunks or one chat.completion / response object; exactly one
//                    terminal outcome; the client closing the connection cancels the
//                    request on the worker. For the accessibility class an SSE stream
//                    starts at once with the comment `: admitted <request id>`, and
//                    text comes in sentences
//   GET /v1/models (authenticated), /healthz, /readyz, /metrics (Prometheus text).
//
// Thread-safety: Handle() runs on many HTTP pool threads at once, CheckHead on the
// loop thread; an HttpGateway holds only atomic counters beside the Gateway (not
// owned, thread-safe, outliving it).
#ifndef GANTRY_ROUTER_HTTP_GATEWAY_H_
#define GANTRY_ROUTER_HTTP_GATEWAY_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "router/gateway.h"
#include "router/http/http_server.h"

namespace gantry::router {

class HttpGateway {
 public:
  explicit HttpGateway(Gateway* gateway);
  HttpGateway(const HttpGateway&) = delete;
  HttpGateway& operator=(const HttpGateway&) = delete;

  // The HTTP handler (router/http/http_server.h). A streamed response holds its pool
  // thread until it has ended; a whole (non-streamed) response does not: the handler
  // returns after admission, and the response is sent from the thread that delivers the
  // worker's last event (the broker's), saving a thread hand-off.
  void Handle(http::HttpRequest request, std::shared_ptr<http::ResponseWriter> writer);
  // Whether Handle() answers `request` without blocking: a non-streamed chat or
  // Responses request with a small body (8 KiB at most), whose admission (render +
  // count included) is short. The HTTP server may then run it on its loop thread
  // (HttpServerOptions::run_on_loop). Conservative: a body that might ask for a stream
  // (any "stream" in it, or any backslash-u escape that could spell it) says false.
  static bool AnswersWithoutBlocking(const http::HttpRequest& request);
  // The HTTP server's on_headers hook (HttpServerOptions::on_headers), on its loop
  // thread: a chat or Responses request whose key is missing or unknown is refused
  // (401 unauthenticated, counted as Handle counts it) as soon as its header section is
  // complete, so that its body is never read. Cheap: one SHA-256 of the key. An
  // authenticated request's body is read under its principal (`body_key`: the server
  // caps the bodies read at once per key).
  absl::Status CheckHead(const http::HttpRequest& head, std::string* body_key);
  // The text of /metrics: the HTTP counters, then the pipeline's (Gateway::MetricsText).
  std::string MetricsText() const;

  Gateway* gateway() const { return gateway_; }

 private:
  enum class Api { kChatCompletions, kResponses };
  static const char* ApiName(Api api);  // "chat.completions", "responses"
  void HandleChat(Api api, const http::HttpRequest& request, http::ResponseWriter& writer,
                  const std::shared_ptr<http::ResponseWriter>& shared_writer);
  void HandleModels(const http::HttpRequest& request, http::ResponseWriter& writer);
  void Fail(http::ResponseWriter& writer, const absl::Status& status,
            const http::HeaderList& extra = {});

  Gateway* const gateway_;
  std::atomic<uint64_t> requests_total_{0};
  std::atomic<uint64_t> responses_2xx_{0};
  std::atomic<uint64_t> responses_4xx_{0};
  std::atomic<uint64_t> responses_5xx_{0};
};

}  // namespace gantry::router

#endif  // GANTRY_ROUTER_HTTP_GATEWAY_H_
