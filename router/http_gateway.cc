#include "router/http_gateway.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/error_codes.h"
#include "common/json.h"
#include "common/status.h"
#include "policy/policy_decide.h"
#include "router/http/error_response.h"
#include "router/openai/chat_request.h"
#include "router/openai/chat_response.h"
#include "router/openai/responses_request.h"
#include "router/openai/responses_response.h"

namespace gantry::router {
namespace {

using json::Value;

// The longest silence on a started SSE stream before a keep-alive comment.
constexpr int kKeepAliveMs = 15000;

http::HttpResponse JsonResponse(int status, const Value& body, http::HeaderList headers = {}) {
  http::HttpResponse response;
  response.status = status;
  response.headers = std::move(headers);
  response.headers.emplace_back("Content-Type", "application/json");
  response.body = json::DumpCompact(body);
  return response;
}

}  // namespace

HttpGateway::HttpGateway(Gateway* gateway) : gateway_(gateway) {}

void HttpGateway::Fail(http::ResponseWriter& writer, const absl::Status& status,
                   const http::HeaderList& extra) {
  http::HttpResponse response = http::ErrorResponse(status);
  for (const auto& h : extra) response.headers.push_back(h);
  int code = response.status;
  (code >= 500 ? responses_5xx_ : responses_4xx_)++;
  gateway_->metrics().Error(http::ErrorCodeOf(status));
  writer.Send(response);
}

void HttpGateway::Handle(http::HttpRequest request, std::shared_ptr<http::ResponseWriter> writer) {
  ++requests_total_;
  const std::string& path = request.path;
  auto only = [&](const char* method) {
    if (request.method == method) return true;
    Fail(*writer, ReasonError("method_not_allowed",
                              absl::StrCat(request.method, " is not allowed on ", path)),
         {{"Allow", method}});
    return false;
  };
  if (path == "/v1/chat/completions") {
    if (only("POST")) HandleChat(Api::kChatCompletions, request, *writer, writer);
  } else if (path == "/v1/responses") {
    if (only("POST")) HandleChat(Api::kResponses, request, *writer, writer);
  } else if (path == "/v1/models") {
    if (only("GET")) HandleModels(request, *writer);
  } else if (path == "/healthz") {
    if (only("GET")) {
      ++responses_2xx_;
      writer->Send(JsonResponse(200, json::Parse(R"({"status":"ok"})").value()));
    }
  } else if (path == "/readyz") {
    if (only("GET")) {
      if (absl::Status ready = gateway_->Ready(); !ready.ok()) {
        Fail(*writer, WithRetryAfter(ready, 1000));
      } else {
        ++responses_2xx_;
        writer->Send(JsonResponse(200, json::Parse(R"({"status":"ready"})").value()));
      }
    }
  } else if (path == "/metrics") {
    if (only("GET")) {
      ++responses_2xx_;
      http::HttpResponse response;
      response.headers.emplace_back("Content-Type", "text/plain; version=0.0.4");
      response.body = MetricsText();
      writer->Send(response);
    }
  } else {
    Fail(*writer, ReasonError("route_not_found", absl::StrCat("no route for ", path)));
  }
}

bool HttpGateway::AnswersWithoutBlocking(const http::HttpRequest& request) {
  constexpr size_t kMaxBody = 8 * 1024;  // keeps rendering short on the loop thread
  return request.method == "POST" &&
         (request.path == "/v1/chat/completions" || request.path == "/v1/responses") &&
         request.body.size() <= kMaxBody &&
         request.body.find("stream") == std::string::npos &&
         request.body.find("\\u") == std::string::npos;
}

absl::Status HttpGateway::CheckHead(const http::HttpRequest& head, std::string* body_key) {
  absl::Status refusal;
  if (head.method == "POST" &&
      (head.path == "/v1/chat/completions" || head.path == "/v1/responses")) {
    auto principal = gateway_->AuthenticateKey(*gateway_->policy(), head.Header("authorization"));
    if (principal.ok()) {
      *body_key = *principal;
      return absl::OkStatus();
    }
    refusal = principal.status();
  } else {
    // Every other route takes no body: one announced there is refused before it is
    // read (found by a red team: slow bodies on POST /healthz, needing no key, held
    // every connection slot for the whole body deadline).
    const absl::string_view length = head.Header("content-length");
    if (head.Header("transfer-encoding").empty() && (length.empty() || length == "0")) {
      return absl::OkStatus();
    }
    const bool known = head.path == "/v1/models" || head.path == "/healthz" ||
                       head.path == "/readyz" || head.path == "/metrics" ||
                       head.path == "/v1/chat/completions" || head.path == "/v1/responses";
    refusal = !known ? ReasonError("route_not_found", absl::StrCat("no route for ", head.path))
              : head.method == "GET"
                  ? ReasonError("invalid_request", absl::StrCat("GET ", head.path,
                                                                " takes no request body"))
                  : ReasonError("method_not_allowed",
                                absl::StrCat(head.method, " is not allowed on ", head.path));
  }
  ++requests_total_;
  ++responses_4xx_;
  gateway_->metrics().Error(http::ErrorCodeOf(refusal));
  return refusal;
}

const char* HttpGateway::ApiName(Api api) {
  return api == Api::kResponses ? "responses" : "chat.completions";
}

void HttpGateway::HandleModels(const http::HttpRequest& request, http::ResponseWriter& writer) {
  std::shared_ptr<const policy::Snapshot> snapshot = gateway_->policy();
  auto principal = gateway_->AuthenticateKey(*snapshot, request.Header("authorization"));
  if (!principal.ok()) return Fail(writer, principal.status());
  std::vector<openai::ModelListing> listings;
  for (const auto& [name, entry] : gateway_->models()) {
    if (!policy::ModelGranted(*snapshot, *principal, name)) continue;
    auto facts = gateway_->FactsOf(name);  // a live bundle's READY wins over the catalog
    listings.push_back({name, facts ? facts->context_length : entry.context_length,
                        facts ? facts->default_max_tokens : entry.default_max_tokens});
  }
  ++responses_2xx_;
  writer.Send(JsonResponse(
      200, openai::ModelListJson(listings, gateway_->clock()->UnixMicros() / 1000000)));
}

void HttpGateway::HandleChat(Api api, const http::HttpRequest& http_request,
                         http::ResponseWriter& writer,
                         const std::shared_ptr<http::ResponseWriter>& shared_writer) {
  const int64_t received_us = gateway_->clock()->UnixMicros();
  // 1. Authenticate.
  std::shared_ptr<const policy::Snapshot> snapshot = gateway_->policy();
  auto principal = gateway_->AuthenticateKey(*snapshot, http_request.Header("authorization"));
  if (!principal.ok()) return Fail(writer, principal.status());

  // 2. Parse.
  // Both APIs map onto the same internal request; Responses keeps what its response
  // object echoes.
  json::Value echo = json::Value::EmptyObject();
  absl::StatusOr<openai::ChatCompletionRequest> parsed;
  if (api == Api::kResponses) {
    auto responses = openai::ParseResponsesRequest(http_request.body);
    if (!responses.ok()) return Fail(writer, responses.status());
    echo = std::move(responses->echo);
    parsed = std::move(responses->chat);
  } else {
    parsed = openai::ParseChatCompletionRequest(http_request.body);
  }
  if (!parsed.ok()) return Fail(writer, parsed.status());
  const bool stream = parsed->stream;
  const bool include_usage = parsed->include_usage;

  // 3-8. Policy, model, tools, render + count, context, budgets, admission.
  Gateway::ChatInput input;
  input.api = ApiName(api);
  input.user_agent = std::string(http_request.Header("user-agent"));
  input.request = std::move(parsed->request);
  input.has_max_tokens = parsed->has_max_tokens;
  input.received_us = received_us;
  http::HeaderList policy_headers;
  auto admitted = gateway_->Admit(snapshot, *principal, std::move(input), &policy_headers);
  if (!admitted.ok()) return Fail(writer, admitted.status(), policy_headers);
  Gateway::Call& call = **admitted;
  policy_headers = call.headers();
  if (api == Api::kResponses) {
    // The response object echoes the tools the model was offered: not the stripped ones.
    const std::vector<std::string>& stripped = call.stripped_tools();
    if (Value* tools = echo.Find("tools"); !stripped.empty() && tools != nullptr && tools->is_array()) {
      auto& items = tools->items();
      items.erase(std::remove_if(items.begin(), items.end(),
                                 [&](const Value& tool) {
                                   const Value* n = tool.Find("name");
                                   return n != nullptr && n->is_string() &&
                                          std::find(stripped.begin(), stripped.end(),
                                                    n->as_string()) != stripped.end();
                                 }),
                  items.end());
    }
  }
  const std::string request_id = call.request_id();
  const std::string model_name = call.model();
  broker::Broker* broker = gateway_->broker();
  shared_writer->OnClose([broker, request_id] {
    broker->Cancel(request_id, "the client closed the connection");
  });

  // 9. Answer; exactly one terminal outcome.
  openai::ResponseMeta meta{openai::CompletionIdFor(request_id), model_name, call.created_unix_s()};
  const bool responses_api = api == Api::kResponses;
  if (!stream) {
    // One whole response: no thread waits for it. The events are read where the broker
    // delivers them, and the last one sends the response from there.
    struct Reply {
      Reply(const openai::ResponseMeta& meta, std::string response_id, json::Value echo)
          : accumulator(meta), responses(std::move(response_id), meta.model, meta.created,
                                         std::move(echo)) {}
      std::unique_ptr<Gateway::Call> call;
      std::shared_ptr<http::ResponseWriter> writer;
      http::HeaderList headers;
      openai::ChatCompletionAccumulator accumulator;
      openai::ResponsesRenderer responses;
    };
    auto reply = std::make_shared<Reply>(meta, openai::ResponseIdFor(request_id), std::move(echo));
    reply->call = std::move(*admitted);
    reply->writer = shared_writer;
    reply->headers = std::move(policy_headers);
    Gateway::Call* raw = reply->call.get();
    raw->OnEvents([this, reply, responses_api]() {
      while (std::optional<v1::StreamEvent> event = reply->call->Next(0)) {
        if (responses_api) {
          reply->responses.OnEvent(*event);
        } else {
          reply->accumulator.Add(*event);
        }
        if (!event->has_terminal()) continue;
        const absl::Status& error =
            responses_api ? reply->responses.error() : reply->accumulator.error();
        if (!error.ok()) {
          Fail(*reply->writer, error, reply->headers);
        } else {
          ++responses_2xx_;
          reply->writer->Send(JsonResponse(
              200, responses_api ? reply->responses.ResponseJson() : reply->accumulator.ToJson(),
              reply->headers));
        }
        reply->call.reset();  // its outcome is recorded; nothing more will come
        reply->writer.reset();
        return true;
      }
      return false;
    });
    return;
  }
  openai::ChatStreamRenderer renderer(meta, include_usage);
  openai::ResponsesRenderer responses(openai::ResponseIdFor(request_id), model_name,
                                      meta.created, std::move(echo));
  bool started = false;
  auto start_stream = [&](const std::string& prelude) {
    http::HeaderList headers = policy_headers;
    headers.emplace_back("Content-Type", "text/event-stream");
    headers.emplace_back("Cache-Control", "no-cache");
    writer.StartChunked(200, headers);
    ++responses_2xx_;
    started = true;
    if (!prelude.empty()) writer.WriteChunk(prelude);
    if (responses_api) writer.WriteChunk(responses.Start());
  };
  if (call.priority() == v1::PRIORITY_ACCESSIBILITY) {
    // Accessibility: say at once that the request is admitted and working, before the
    // worker's first token (docs/router.md, "Accessibility"). A failure before any
    // output then arrives in the stream rather than as the HTTP status.
    start_stream(absl::StrCat(": admitted ", request_id, "\n\n"));
  }
  while (true) {
    std::optional<v1::StreamEvent> next = call.Next(kKeepAliveMs);
    if (!next) {
      // A long silence (prefill of a long prompt, a slow tool call): an SSE comment
      // keeps proxies and clients from timing the stream out.
      if (started) writer.WriteChunk(": keep-alive\n\n");
      continue;
    }
    const v1::StreamEvent& event = *next;
    if (!started) {
      if (event.has_terminal() && !openai::TerminalStatus(event.terminal()).ok()) {
        Fail(writer, openai::TerminalStatus(event.terminal()), policy_headers);
        break;
      }
      start_stream("");
    }
    writer.WriteChunk(responses_api ? responses.OnEvent(event) : renderer.OnEvent(event));
    if (event.has_terminal() && !openai::TerminalStatus(event.terminal()).ok()) {
      gateway_->metrics().Error(http::ErrorCodeOf(openai::TerminalStatus(event.terminal())));
    }
    if (event.has_terminal()) {
      writer.EndChunked();
      break;
    }
  }
}

std::string HttpGateway::MetricsText() const {
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help, uint64_t value) {
    absl::StrAppend(&out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n", name,
                    " ", value, "\n");
  };
  metric("gantry_router_http_requests_total", "counter", "HTTP requests received.",
         requests_total_.load());
  absl::StrAppend(&out,
                  "# HELP gantry_router_http_responses_total HTTP responses by status class.\n"
                  "# TYPE gantry_router_http_responses_total counter\n"
                  "gantry_router_http_responses_total{class=\"2xx\"} ", responses_2xx_.load(), "\n",
                  "gantry_router_http_responses_total{class=\"4xx\"} ", responses_4xx_.load(), "\n",
                  "gantry_router_http_responses_total{class=\"5xx\"} ", responses_5xx_.load(), "\n");
  out += gateway_->MetricsText();
  return out;
}

}  // namespace gantry::router
