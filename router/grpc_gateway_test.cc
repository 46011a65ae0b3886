// The gRPC Gateway over a real loopback port: the generated stub -> GrpcGateway -> the
// in-process router (real policy engine, tiny tokenizer, real broker over tcp) -> the
// worker TEST DOUBLE (router/fake_worker_for_test.h) speaking real GNTW/1.
#include "router/grpc_gateway.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <chrono>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file.h"
#include "common/json.h"
#include "common/status.h"
#include "gantry/v1/gateway.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "router/fake_worker_for_test.h"
#include "router/http/test_http_client.h"
#include "router/in_process_router_for_test.h"

namespace gantry::router {
namespace {

using testing::FakeStep;
using testing::FakeWorkerForTest;
using testing::FakeWorkerOptions;

constexpr char kModel[] = "test-model";

std::string Metadata(const std::multimap<grpc::string_ref, grpc::string_ref>& m,
                     const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? "" : std::string(it->second.data(), it->second.size());
}

struct ChatResult {
  std::vector<v1::StreamEvent> events;
  grpc::Status status;
  std::string request_id_header;  // initial metadata
  std::string error_code;         // trailing metadata x-gantry-error-code
  std::string policy_rule;        // trailing metadata on a refusal
};

// A call made below the generated stubs (gRPC's generic API), so that a test decides
// what reaches the server: the initial metadata only, a message or not, a half-close
// or not. Waits for the server's status (`deadline_s` at most) and returns it with the
// trailing x-gantry-error-code.
struct RawOutcome {
  grpc::Status status;
  std::string error_code;
};
RawOutcome RawCall(int port, const std::string& method, const std::string& key,
                   const std::optional<std::string>& message, bool half_close,
                   int deadline_s = 10) {
  grpc::GenericStub stub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                             grpc::InsecureChannelCredentials()));
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  if (!key.empty()) ctx.AddMetadata("authorization", "Bearer " + key);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(deadline_s));
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call = stub.PrepareCall(&ctx, method, &cq);
  auto step = [&](intptr_t want) {  // waits for the operation tagged `want`
    void* tag = nullptr;
    bool ok = false;
    while (cq.Next(&tag, &ok) && reinterpret_cast<intptr_t>(tag) != want) {
    }
  };
  call->StartCall(reinterpret_cast<void*>(1));
  step(1);
  grpc::Slice slice(message.value_or(""));
  grpc::ByteBuffer bytes(&slice, 1);
  if (message) {
    call->Write(bytes, reinterpret_cast<void*>(2));
    step(2);
  }
  if (half_close) {
    call->WritesDone(reinterpret_cast<void*>(3));
    step(3);
  }
  RawOutcome out;
  call->Finish(&out.status, reinterpret_cast<void*>(4));
  step(4);
  out.error_code = Metadata(ctx.GetServerTrailingMetadata(), "x-gantry-error-code");
  cq.Shutdown();
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {
  }
  return out;
}

class GrpcGatewayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::map<std::string, ModelEntry> models;
    models[kModel] = TinyModelEntryForTest(kModel);
    models["idle-model"] = TinyModelEntryForTest("idle-model");
    auto router = InProcessRouterForTest::Start(FourPrincipalsPolicyForTest({kModel, "idle-model"}), models);
    ASSERT_TRUE(router.ok()) << router.status();
    router_ = std::move(*router);
    auto grpc_gateway = GrpcGateway::Start(router_->gateway(), {});
    ASSERT_TRUE(grpc_gateway.ok()) << grpc_gateway.status();
    grpc_ = std::move(*grpc_gateway);
    stub_ = v1::Gateway::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", grpc_->port()),
                                                     grpc::InsecureChannelCredentials()));
    StartWorker({FakeStep::Reasoning("hmm"), FakeStep::Text("Hello"), FakeStep::Text(", world"),
                 FakeStep::Finish(v1::FINISH_STOP)});
  }

  void TearDown() override {
    grpc_.reset();
    worker_.reset();
    router_.reset();
  }

  void StartWorker(std::vector<FakeStep> script) {
    FakeWorkerOptions w;
    w.endpoint = router_->broker()->endpoint();
    w.model = kModel;
    w.context_length = 2048;  // READY wins over the catalog's 4096
    w.script = std::move(script);
    if (worker_) {
      // The one before must be gone first: else the count below could be its own.
      worker_.reset();
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (router_->broker()->LiveWorkerCount(kModel) != 0 &&
             std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    worker_ = std::make_unique<FakeWorkerForTest>(w);
    ASSERT_TRUE(worker_->WaitFor([&] { return router_->broker()->LiveWorkerCount(kModel) == 1; },
                                 5000));
  }

  static v1::ChatRequest Request(const std::string& model = kModel,
                                 const std::string& text = "hi") {
    v1::ChatRequest chat;
    chat.mutable_request()->set_model(model);
    v1::ChatMessage* m = chat.mutable_request()->add_messages();
    m->set_role("user");
    m->set_content(text);
    chat.set_include_usage(true);
    return chat;
  }

  static void Authorize(grpc::ClientContext* ctx, const std::string& key) {
    if (!key.empty()) ctx->AddMetadata("authorization", "Bearer " + key);
  }

  // The whole Chat call; `on_event` sees each event as it arrives.
  ChatResult Chat(const v1::ChatRequest& chat, const std::string& key = "k-dev",
                  const std::function<void(const v1::StreamEvent&)>& on_event = nullptr,
                  int deadline_s = 20) {
    grpc::ClientContext ctx;
    Authorize(&ctx, key);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(deadline_s));
    ChatResult out;
    auto reader = stub_->Chat(&ctx, chat);
    v1::StreamEvent event;
    while (reader->Read(&event)) {
      if (on_event) on_event(event);
      out.events.push_back(event);
    }
    out.status = reader->Finish();
    out.request_id_header = Metadata(ctx.GetServerInitialMetadata(), "x-gantry-request-id");
    out.error_code = Metadata(ctx.GetServerTrailingMetadata(), "x-gantry-error-code");
    out.policy_rule = Metadata(ctx.GetServerTrailingMetadata(), "x-gantry-policy-rule");
    return out;
  }

  bool CancelAs(const std::string& key, const std::string& request_id) {
    grpc::ClientContext ctx;
    Authorize(&ctx, key);
    v1::CancelRequest request;
    request.set_request_id(request_id);
    v1::CancelResponse response;
    grpc::Status status = stub_->Cancel(&ctx, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.cancelled();
  }

  // The same request over HTTP, streamed: (content, reasoning, finish, completion tokens).
  std::vector<std::string> HttpStreamed(const std::string& key = "k-dev") {
    auto client = http::TestHttpClient::Connect(router_->port());
    EXPECT_TRUE(client.ok());
    EXPECT_TRUE(client->SendRequest(
        "POST", "/v1/chat/completions",
        absl::StrCat(R"({"model":")", kModel, R"(","stream":true,"stream_options":)",
                     R"({"include_usage":true},"messages":[{"role":"user","content":"hi"}]})"),
        {{"Authorization", "Bearer " + key}, {"Content-Type", "application/json"}}).ok());
    auto response = client->ReadResponse(10000);
    EXPECT_TRUE(response.ok());
    std::string content, reasoning, finish, tokens;
    for (const std::string& line : http::SseDataLines(response->body)) {
      if (line == "[DONE]") continue;
      auto chunk = json::Parse(line);
      EXPECT_TRUE(chunk.ok()) << line;
      if (const json::Value* usage = chunk->Find("usage"); usage && usage->is_object()) {
        tokens = std::to_string(*usage->Find("completion_tokens")->as_int64());
      }
      for (const json::Value& choice : chunk->Find("choices")->items()) {
        const json::Value& delta = *choice.Find("delta");
        if (const json::Value* c = delta.Find("content")) content += c->as_string();
        if (const json::Value* r = delta.Find("reasoning_content")) reasoning += r->as_string();
        if (const json::Value* f = choice.Find("finish_reason"); f && f->is_string()) {
          finish = f->as_string();
        }
      }
    }
    return {content, reasoning, finish, tokens};
  }

  std::unique_ptr<InProcessRouterForTest> router_;
  std::unique_ptr<GrpcGateway> grpc_;
  std::unique_ptr<v1::Gateway::Stub> stub_;
  std::unique_ptr<FakeWorkerForTest> worker_;
};

// The events of a Chat stream in the gRPC contract's shape: admitted first (seq 0,
// the request id), seq without gaps, exactly one Terminal, last.
void ExpectWellFormed(const ChatResult& r) {
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  ASSERT_GE(r.events.size(), 2u);
  EXPECT_TRUE(r.events[0].has_admitted());
  EXPECT_TRUE(absl::StartsWith(r.events[0].request_id(), "req_"));
  EXPECT_EQ(r.events[0].request_id(), r.request_id_header);
  int terminals = 0;
  for (size_t i = 0; i < r.events.size(); ++i) {
    EXPECT_EQ(r.events[i].seq(), i);
    EXPECT_EQ(r.events[i].request_id(), r.events[0].request_id());
    terminals += r.events[i].has_terminal() ? 1 : 0;
  }
  EXPECT_EQ(terminals, 1);
  EXPECT_TRUE(r.events.back().has_terminal());
}

TEST_F(GrpcGatewayTest, StreamedChatEqualsWhatHttpStreams) {
  ChatResult r = Chat(Request());
  ExpectWellFormed(r);
  std::string content, reasoning, finish, tokens;
  bool usage_before_terminal = false;
  for (size_t i = 0; i < r.events.size(); ++i) {
    const v1::StreamEvent& e = r.events[i];
    if (e.has_text()) content += e.text().text();
    if (e.has_reasoning()) reasoning += e.reasoning().text();
    if (e.has_usage()) {
      usage_before_terminal = i + 2 == r.events.size();
      tokens = std::to_string(e.usage().completion_tokens());
    }
    if (e.has_terminal()) finish = e.terminal().finish_reason() == v1::FINISH_STOP ? "stop" : "?";
  }
  EXPECT_TRUE(usage_before_terminal);
  EXPECT_EQ((std::vector<std::string>{content, reasoning, finish, tokens}), HttpStreamed());
  EXPECT_EQ(content, "Hello, world");
  // The worker got what the pipeline made of it: the principal, its class, the clamp.
  auto requests = worker_->requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].principal(), "dev");
  EXPECT_EQ(requests[0].priority(), v1::PRIORITY_INTERACTIVE);
  EXPECT_EQ(requests[0].request_id(), r.request_id_header);
  EXPECT_GT(requests[0].router_prompt_tokens(), 0u);
}

TEST_F(GrpcGatewayTest, RefusalsBeforeAdmissionAreStatusesWithTheReason) {
  ChatResult r = Chat(Request(), "k-wrong");
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(absl::StartsWith(r.status.error_message(), "unauthenticated: "));
  EXPECT_EQ(r.error_code, "unauthenticated");
  EXPECT_TRUE(r.events.empty());

  r = Chat(Request(), "");
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAUTHENTICATED);

  r = Chat(Request(), "k-out");  // no grant for the model
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(r.error_code, "policy_denied");
  EXPECT_FALSE(r.policy_rule.empty());
  EXPECT_TRUE(r.events.empty());

  v1::ChatRequest bad = Request();
  bad.mutable_request()->mutable_messages(0)->set_role("robot");
  r = Chat(bad);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(r.error_code, "invalid_request");
  EXPECT_TRUE(absl::StrContains(r.status.error_message(), "request.messages[0].role"));

  bad = Request();
  v1::ChatMessage* tool = bad.mutable_request()->add_messages();
  tool->set_role("tool");
  tool->set_tool_call_id("call_nobody");
  r = Chat(bad);
  EXPECT_EQ(r.error_code, "unknown_tool_call_id");

  // The router's own fields, and modes it does not know, are refused, never overwritten.
  for (int which = 0; which < 4; ++which) {
    bad = Request();
    v1::InferenceRequest* req = bad.mutable_request();
    if (which == 0) req->set_request_id("req_mine");
    if (which == 1) req->set_principal("root");
    if (which == 2) req->set_special_tokens_in_content(true);
    if (which == 3) req->set_tool_choice(static_cast<v1::ToolChoiceMode>(17));
    r = Chat(bad);
    EXPECT_EQ(r.error_code, "unsupported_parameter") << which << " " << r.status.error_message();
  }

  // A response format the worker could not enforce is refused before admission, as on
  // HTTP.
  bad = Request();
  bad.mutable_request()->mutable_response_format()->set_type(v1::OUTPUT_JSON_SCHEMA);
  bad.mutable_request()->mutable_response_format()->set_name("n");
  bad.mutable_request()->mutable_response_format()->set_schema_json(R"({"type":"string","pattern":"x"})");
  r = Chat(bad);
  EXPECT_EQ(r.error_code, "unsupported_parameter") << r.status.error_message();
  bad.mutable_request()->mutable_response_format()->set_type(v1::OUTPUT_TEXT);
  r = Chat(bad);
  EXPECT_EQ(r.error_code, "invalid_request") << r.status.error_message();

  // A field this gantry.v1 does not know (a later client's), at any depth, is refused
  // unread, never dropped.
  for (int where = 0; where < 2; ++where) {
    bad = Request();
    google::protobuf::Message* at = where == 0 ? static_cast<google::protobuf::Message*>(&bad)
                                               : bad.mutable_request()->mutable_sampling();
    at->GetReflection()->MutableUnknownFields(at)->AddVarint(999, 1);
    r = Chat(bad);
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(r.error_code, "unsupported_parameter");
    EXPECT_TRUE(absl::StrContains(r.status.error_message(), where == 0 ? "#999" : "request.sampling.#999"))
        << r.status.error_message();
  }

  // A refusal after the policy: the reason's code, here with a retry hint.
  grpc::ClientContext ctx;
  Authorize(&ctx, "k-dev");
  auto reader = stub_->Chat(&ctx, Request("idle-model"));
  v1::StreamEvent event;
  EXPECT_FALSE(reader->Read(&event));
  grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Metadata(ctx.GetServerTrailingMetadata(), "x-gantry-error-code"), "no_worker");
  EXPECT_FALSE(Metadata(ctx.GetServerTrailingMetadata(), "x-gantry-retry-after-ms").empty());
}

TEST_F(GrpcGatewayTest, ListModelsGivesTheLiveFacts) {
  grpc::ClientContext ctx;
  Authorize(&ctx, "k-dev");
  v1::ListModelsResponse response;
  ASSERT_TRUE(stub_->ListModels(&ctx, {}, &response).ok());
  ASSERT_EQ(response.models_size(), 2);
  const v1::ModelInfo& idle = response.models(0);
  const v1::ModelInfo& live = response.models(1);
  EXPECT_EQ(idle.name(), "idle-model");
  EXPECT_EQ(idle.live_workers(), 0u);
  EXPECT_EQ(idle.context_length(), 4096u);  // the catalog
  EXPECT_EQ(idle.default_max_tokens(), 1024u);
  EXPECT_EQ(live.name(), kModel);
  EXPECT_EQ(live.live_workers(), 1u);
  EXPECT_EQ(live.context_length(), 2048u);  // the worker's READY
  EXPECT_EQ(live.tool_protocol(), "hermes_json");

  grpc::ClientContext anonymous;
  EXPECT_EQ(stub_->ListModels(&anonymous, {}, &response).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);

  // Only the models the principal's grants name: the outsider has none.
  grpc::ClientContext outsider;
  Authorize(&outsider, "k-out");
  v1::ListModelsResponse none;
  ASSERT_TRUE(stub_->ListModels(&outsider, {}, &none).ok());
  EXPECT_EQ(none.models_size(), 0);
}

TEST_F(GrpcGatewayTest, HealthFollowsTheLiveWorkers) {
  namespace health = grpc::health::v1;
  auto stub = health::Health::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", grpc_->port()), grpc::InsecureChannelCredentials()));
  auto check = [&](const std::string& service, health::HealthCheckResponse* out) {
    grpc::ClientContext ctx;  // no key: health is open, like /readyz
    health::HealthCheckRequest request;
    request.set_service(service);
    return stub->Check(&ctx, request, out);
  };
  health::HealthCheckResponse response;
  ASSERT_TRUE(check("", &response).ok());
  EXPECT_EQ(response.status(), health::HealthCheckResponse::SERVING);
  ASSERT_TRUE(check("gantry.v1.Gateway", &response).ok());
  EXPECT_EQ(response.status(), health::HealthCheckResponse::SERVING);
  EXPECT_EQ(check("no.such.Service", &response).error_code(), grpc::StatusCode::NOT_FOUND);

  // Watch sees SERVING, then NOT_SERVING once the only worker is gone.
  grpc::ClientContext watch_ctx;
  watch_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  auto watch = stub->Watch(&watch_ctx, health::HealthCheckRequest());
  ASSERT_TRUE(watch->Read(&response));
  EXPECT_EQ(response.status(), health::HealthCheckResponse::SERVING);
  worker_->Kill();
  ASSERT_TRUE(watch->Read(&response));  // the broker notices within 3 s
  EXPECT_EQ(response.status(), health::HealthCheckResponse::NOT_SERVING);
  watch_ctx.TryCancel();
  ASSERT_TRUE(check("", &response).ok());
  EXPECT_EQ(response.status(), health::HealthCheckResponse::NOT_SERVING);
}

// A request message over max_receive_message_bytes is refused by gRPC before it reaches
// the gateway (nothing is admitted), whatever its key; one under it is served.
TEST_F(GrpcGatewayTest, ARequestOverTheMessageLimitIsRefusedUnread) {
  GrpcGatewayOptions options;
  options.max_receive_message_bytes = 64 << 10;
  auto small = GrpcGateway::Start(router_->gateway(), options);
  ASSERT_TRUE(small.ok()) << small.status();
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(8 << 20);
  auto stub = v1::Gateway::NewStub(grpc::CreateCustomChannel(
      absl::StrCat("127.0.0.1:", (*small)->port()), grpc::InsecureChannelCredentials(), args));
  auto call = [&](size_t text_bytes) {
    grpc::ClientContext ctx;
    Authorize(&ctx, "k-dev");
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    auto reader = stub->Chat(&ctx, Request(kModel, std::string(text_bytes, 'a')));
    v1::StreamEvent event;
    int events = 0;
    while (reader->Read(&event)) ++events;
    return std::make_pair(reader->Finish(), events);
  };
  const uint64_t dispatched = router_->broker()->stats().dispatched;
  auto [big, big_events] = call(1 << 20);
  EXPECT_EQ(big.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << big.error_message();
  EXPECT_EQ(big_events, 0);
  EXPECT_EQ(router_->broker()->stats().dispatched, dispatched);
  auto [fits, fits_events] = call(1000);
  EXPECT_TRUE(fits.ok()) << fits.error_message();
  EXPECT_GT(fits_events, 0);
}

// The key is checked on the initial metadata, before any of the request message is
// read: a call without a valid key is refused while its client has sent nothing but
// headers (it would wait for its deadline if the server first read the message). Only
// then, with a valid key, is the message read and checked.
TEST_F(GrpcGatewayTest, ACallWithoutAValidKeyIsRefusedBeforeItsMessageIsRead) {
  const uint64_t errors_before = router_->gateway()->metrics().Errors("unauthenticated");
  for (const char* method :
       {"/gantry.v1.Gateway/Chat", "/gantry.v1.Gateway/ListModels", "/gantry.v1.Gateway/Cancel"}) {
    for (const char* key : {"", "k-wrong"}) {
      RawOutcome r = RawCall(grpc_->port(), method, key, std::nullopt, false);
      EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
          << method << " " << key << ": " << r.status.error_message();
      EXPECT_EQ(r.error_code, "unauthenticated") << method;
    }
  }
  EXPECT_EQ(router_->gateway()->metrics().Errors("unauthenticated"), errors_before + 6);
  // A method the listener does not serve, with or without a key: unread.
  EXPECT_EQ(RawCall(grpc_->port(), "/gantry.v1.Gateway/Nope", "k-dev", std::nullopt, false)
                .status.error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(RawCall(grpc_->port(), "/grpc.reflection.v1alpha.ServerReflection/Info", "",
                    std::nullopt, false).status.error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  // With a key, the message is awaited: a client that half-closes without one, or
  // sends bytes that are not the method's message, is refused invalid_request.
  for (const char* method :
       {"/gantry.v1.Gateway/Chat", "/gantry.v1.Gateway/ListModels", "/gantry.v1.Gateway/Cancel"}) {
    RawOutcome none = RawCall(grpc_->port(), method, "k-dev", std::nullopt, true);
    EXPECT_EQ(none.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << method;
    EXPECT_EQ(none.error_code, "invalid_request") << method;
    EXPECT_TRUE(absl::StrContains(none.status.error_message(), "no request message"));
    RawOutcome garbage = RawCall(grpc_->port(), method, "k-dev", std::string("\xff\xff\xff"), true);
    EXPECT_EQ(garbage.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << method;
    EXPECT_EQ(garbage.error_code, "invalid_request") << method;
  }
  // And without a half-close a keyed call waits for its message (here, until the
  // client's deadline): only a call with a valid key makes the server read.
  RawOutcome waiting =
      RawCall(grpc_->port(), "/gantry.v1.Gateway/Chat", "k-dev", std::nullopt, false, 1);
  EXPECT_EQ(waiting.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(router_->broker()->stats().dispatched, 0u);
}

// Each Chat call holds a thread from its read to its Terminal: past max_streams the next
// one is refused server_busy on its metadata, unread, and a place frees when a call ends.
TEST_F(GrpcGatewayTest, ChatStreamsAreCappedBeforeTheyAreRead) {
  GrpcGatewayOptions options;
  options.max_streams = 1;
  auto capped = GrpcGateway::Start(router_->gateway(), options);
  ASSERT_TRUE(capped.ok()) << capped.status();
  worker_->SetScript({FakeStep::Text("partial"), FakeStep::Hang()});
  auto stub = v1::Gateway::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", (*capped)->port()), grpc::InsecureChannelCredentials()));
  grpc::ClientContext hold_ctx;
  Authorize(&hold_ctx, "k-dev");
  auto hold = stub->Chat(&hold_ctx, Request());
  v1::StreamEvent event;
  ASSERT_TRUE(hold->Read(&event));  // admitted: the one place is taken
  RawOutcome busy = RawCall((*capped)->port(), "/gantry.v1.Gateway/Chat", "k-dev", std::nullopt, false);
  EXPECT_EQ(busy.status.error_code(), grpc::StatusCode::UNAVAILABLE) << busy.status.error_message();
  EXPECT_EQ(busy.error_code, "server_busy");
  // The unary methods take no place.
  grpc::ClientContext list_ctx;
  Authorize(&list_ctx, "k-dev");
  v1::ListModelsResponse models;
  EXPECT_TRUE(stub->ListModels(&list_ctx, {}, &models).ok());
  hold_ctx.TryCancel();
  while (hold->Read(&event)) {
  }
  hold->Finish();
  worker_->SetScript({FakeStep::Text("again"), FakeStep::Finish(v1::FINISH_STOP)});
  bool served = false;
  for (int i = 0; i < 50 && !served; ++i) {  // the cancelled call ends within a poll
    grpc::ClientContext ctx;
    Authorize(&ctx, "k-dev");
    auto reader = stub->Chat(&ctx, Request());
    while (reader->Read(&event)) {
    }
    served = reader->Finish().ok();
    if (!served) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(served);
}

// While gRPC reads a request message the call holds a read place: a principal, or a
// peer address on the open health service, holds only so many (found by a red team:
// unauthenticated Health/Check calls of 16 MB each, unbounded, took the router to 7 GB;
// one key held every Chat place with header-only calls). A message that never comes
// ends the call after read_timeout_ms.
TEST_F(GrpcGatewayTest, CallsBeingReadAreCappedPerPrincipalAndPeerAndTimedOut) {
  GrpcGatewayOptions options;
  options.max_reads_per_principal = 2;
  options.max_health_reads_per_peer = 2;
  options.read_timeout_ms = 3000;
  auto capped = GrpcGateway::Start(router_->gateway(), options);
  ASSERT_TRUE(capped.ok()) << capped.status();
  const int port = (*capped)->port();
  struct Holder {
    std::thread thread;
    RawOutcome outcome;
  };
  auto hold = [&](Holder* h, const char* method, const char* key) {
    h->thread = std::thread([h, port, method, key] {
      h->outcome = RawCall(port, method, key, std::nullopt, false, 10);
    });
  };
  Holder chats[2], checks[2];
  for (Holder& h : chats) hold(&h, "/gantry.v1.Gateway/Chat", "k-dev");
  for (Holder& h : checks) hold(&h, "/grpc.health.v1.Health/Check", "");
  // Until all four are being read (a fixed sleep was too short on a loaded machine).
  for (int i = 0; i < 500 && (*capped)->calls_being_read() < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ((*capped)->calls_being_read(), 4);
  RawOutcome third_chat = RawCall(port, "/gantry.v1.Gateway/Chat", "k-dev", std::nullopt, false, 10);
  EXPECT_EQ(third_chat.status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << third_chat.status.error_message();
  EXPECT_EQ(third_chat.error_code, "server_busy");
  RawOutcome third_check =
      RawCall(port, "/grpc.health.v1.Health/Check", "", std::nullopt, false, 10);
  EXPECT_EQ(third_check.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  // Another principal has places of its own.
  grpc::ClientContext other;
  Authorize(&other, "k-ada");
  v1::ListModelsResponse models;
  auto stub = v1::Gateway::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                                       grpc::InsecureChannelCredentials()));
  EXPECT_TRUE(stub->ListModels(&other, {}, &models).ok());
  // The holders' messages never come: their calls end after 3 s, not at their 10 s.
  for (Holder* h : {&chats[0], &chats[1], &checks[0], &checks[1]}) {
    h->thread.join();
    EXPECT_EQ(h->outcome.status.error_code(), grpc::StatusCode::CANCELLED)
        << h->outcome.status.error_message();
  }
  EXPECT_GE(router_->gateway()->metrics().Errors("request_timeout"), 4u);
  // And their places are free again.
  EXPECT_EQ((*capped)->calls_being_read(), 0);
  grpc::ClientContext again;
  Authorize(&again, "k-dev");
  EXPECT_TRUE(stub->ListModels(&again, {}, &models).ok());
}

// The health service's read places are its own: Gateway calls waiting for their
// message do not count against them (a red team: 16 header-only Chat calls of one
// low-privilege key refused every health check).
TEST_F(GrpcGatewayTest, GatewayReadsDoNotTakeTheHealthServicesPlaces) {
  GrpcGatewayOptions options;
  options.max_health_reads = 2;
  auto listener = GrpcGateway::Start(router_->gateway(), options);
  ASSERT_TRUE(listener.ok()) << listener.status();
  const int port = (*listener)->port();
  std::vector<std::thread> holders;
  for (int i = 0; i < 3; ++i) {
    holders.emplace_back([port] {
      RawCall(port, "/gantry.v1.Gateway/Chat", "k-dev", std::nullopt, false, 2);
    });
  }
  for (int i = 0; i < 300 && (*listener)->calls_being_read() < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ((*listener)->calls_being_read(), 3);
  namespace health = grpc::health::v1;
  auto stub = health::Health::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                                          grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  health::HealthCheckResponse response;
  EXPECT_TRUE(stub->Check(&ctx, health::HealthCheckRequest(), &response).ok());
  for (auto& t : holders) t.join();
}

// A Chat request's bytes count against its principal from its read until Admit
// returns (Admit renders the whole prompt before budgets apply): past the cap it is
// refused server_busy, and the bytes are given back once it is through.
TEST_F(GrpcGatewayTest, BytesWaitingForAdmissionAreCappedPerPrincipal) {
  GrpcGatewayOptions options;
  options.max_admitting_bytes_per_principal = 2000;
  auto listener = GrpcGateway::Start(router_->gateway(), options);
  ASSERT_TRUE(listener.ok()) << listener.status();
  auto stub = v1::Gateway::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", (*listener)->port()), grpc::InsecureChannelCredentials()));
  auto chat = [&](size_t text_bytes) {
    grpc::ClientContext ctx;
    Authorize(&ctx, "k-dev");
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    auto reader = stub->Chat(&ctx, Request(kModel, std::string(text_bytes, 'a')));
    v1::StreamEvent event;
    while (reader->Read(&event)) {
    }
    grpc::Status status = reader->Finish();
    return std::make_pair(status, Metadata(ctx.GetServerTrailingMetadata(), "x-gantry-error-code"));
  };
  auto [big, big_code] = chat(2500);
  EXPECT_EQ(big.error_code(), grpc::StatusCode::UNAVAILABLE) << big.error_message();
  EXPECT_EQ(big_code, "server_busy");
  for (int i = 0; i < 3; ++i) {  // 3 x 1,500 bytes in turn: each gives its bytes back
    worker_->SetScript({FakeStep::Text("ok"), FakeStep::Finish(v1::FINISH_STOP)});
    auto [fits, fits_code] = chat(1500);
    EXPECT_TRUE(fits.ok()) << i << ": " << fits.error_message() << " " << fits_code;
  }
}

// The unauthenticated Watch holds a thread per caller: only max_health_watchers at once.
TEST_F(GrpcGatewayTest, HealthWatchersAreCapped) {
  namespace health = grpc::health::v1;
  GrpcGatewayOptions options;
  options.max_health_watchers = 2;
  auto capped = GrpcGateway::Start(router_->gateway(), options);
  ASSERT_TRUE(capped.ok()) << capped.status();
  auto stub = health::Health::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", (*capped)->port()), grpc::InsecureChannelCredentials()));
  health::HealthCheckResponse response;
  grpc::ClientContext first_ctx, second_ctx;
  auto first = stub->Watch(&first_ctx, health::HealthCheckRequest());
  auto second = stub->Watch(&second_ctx, health::HealthCheckRequest());
  ASSERT_TRUE(first->Read(&response));
  ASSERT_TRUE(second->Read(&response));
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    auto third = stub->Watch(&ctx, health::HealthCheckRequest());
    EXPECT_FALSE(third->Read(&response));
    EXPECT_EQ(third->Finish().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  }
  first_ctx.TryCancel();
  first->Finish();
  // The slot is free again (the server notices the cancel within its 200 ms look).
  bool served = false;
  for (int i = 0; i < 50 && !served; ++i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    auto again = stub->Watch(&ctx, health::HealthCheckRequest());
    served = again->Read(&response);
    ctx.TryCancel();
    again->Finish();
    if (!served) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(served);
  second_ctx.TryCancel();
  second->Finish();
}

TEST_F(GrpcGatewayTest, TheClientsDeadlineBecomesTheRequestsDeadline) {
  const int64_t before_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch()).count();
  ChatResult r = Chat(Request());  // its deadline: now + 20 s
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  std::vector<v1::InferenceRequest> sent = worker_->requests();
  ASSERT_EQ(sent.size(), 1u);
  const int64_t deadline = static_cast<int64_t>(sent[0].deadline_unix_ms());
  // Within the client's 20 s, not the policy's default 1800 s (gRPC may shave a little).
  EXPECT_GT(deadline, before_ms + 15000);
  EXPECT_LE(deadline, before_ms + 21000);
}

TEST_F(GrpcGatewayTest, OnlyTheOwnerCancels) {
  worker_->SetScript({FakeStep::Text("partial"), FakeStep::Hang()});
  std::string id;
  bool refused_to_other = false, owner_cancelled = false;
  ChatResult r = Chat(Request(), "k-dev", [&](const v1::StreamEvent& e) {
    if (e.has_admitted()) id = e.request_id();
    if (!e.has_text()) return;
    // Another principal, knowing the id, is refused and nothing reaches the worker.
    refused_to_other = !CancelAs("k-ada", id);
    EXPECT_TRUE(worker_->cancels_received().empty());
    owner_cancelled = CancelAs("k-dev", id);
  });
  EXPECT_TRUE(refused_to_other);
  EXPECT_TRUE(owner_cancelled);
  ExpectWellFormed(r);
  EXPECT_EQ(r.events.back().terminal().finish_reason(), v1::FINISH_CANCELLED);
  EXPECT_EQ(r.events.back().terminal().status().reason(), "cancelled");
  EXPECT_TRUE(worker_->WaitFor([&] { return worker_->cancels_received().size() == 1; }, 5000));
  EXPECT_EQ(worker_->cancels_received()[0], id);
  EXPECT_FALSE(CancelAs("k-dev", id));  // finished
  EXPECT_FALSE(CancelAs("k-dev", "req_000000000000000000000000"));
}

TEST_F(GrpcGatewayTest, AQueuedRequestCanBeCancelledByItsAdmittedId) {
  // Both slots of the worker hang; a third request waits in the queue, and its admitted
  // event is all the client has: that is enough to cancel it.
  worker_->SetScript({FakeStep::Hang()});
  std::vector<std::thread> busy;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  for (int i = 0; i < 2; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    Authorize(contexts.back().get(), "k-dev");
    busy.emplace_back([&, ctx = contexts.back().get()] {
      auto reader = stub_->Chat(ctx, Request());
      v1::StreamEvent e;
      while (reader->Read(&e)) {
      }
      reader->Finish();
    });
  }
  ASSERT_TRUE(worker_->WaitFor([&] { return worker_->requests_received() == 2; }, 5000));
  ChatResult r = Chat(Request(), "k-dev", [&](const v1::StreamEvent& e) {
    if (e.has_admitted()) {
      EXPECT_EQ(router_->broker()->stats().queued, 1u);
      EXPECT_TRUE(CancelAs("k-dev", e.request_id()));
    }
  });
  for (auto& ctx : contexts) ctx->TryCancel();
  for (auto& t : busy) t.join();
  ExpectWellFormed(r);
  EXPECT_EQ(r.events.size(), 3u);  // admitted, usage (include_usage), the Terminal
  EXPECT_EQ(r.events.back().terminal().finish_reason(), v1::FINISH_CANCELLED);
  EXPECT_EQ(r.events.back().terminal().status().message(), "cancelled by the client (gRPC Cancel)");
}

TEST_F(GrpcGatewayTest, ManyConcurrentStreams) {
  // 200 streams held at the gate until all are in flight (four workers of 50 slots).
  worker_.reset();
  std::vector<std::unique_ptr<FakeWorkerForTest>> workers;
  for (int i = 0; i < 4; ++i) {
    FakeWorkerOptions w;
    w.endpoint = router_->broker()->endpoint();
    w.worker_id = absl::StrCat("host/", i, "/many");
    w.model = kModel;
    w.slots = 50;
    w.script = {FakeStep::Text("Hi. "), FakeStep::Gate(), FakeStep::Text("Bye."),
                FakeStep::Finish(v1::FINISH_STOP)};
    workers.push_back(std::make_unique<FakeWorkerForTest>(w));
  }
  ASSERT_TRUE(workers[0]->WaitFor(
      [&] { return router_->broker()->LiveWorkerCount(kModel) == 4; }, 5000));
  constexpr int kStreams = 200;
  std::atomic<int> good{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kStreams; ++i) {
    clients.emplace_back([&, i] {
      // A deadline past the wait below: on a loaded machine getting 200 streams in
      // flight can take most of it, and the streams must still be alive afterwards.
      ChatResult r = Chat(Request(), i % 2 ? "k-dev" : "k-ada", nullptr, 90);
      std::string text;
      for (const auto& e : r.events) text += e.has_text() ? e.text().text() : "";
      if (r.status.ok() && r.events.size() >= 4 && r.events[0].has_admitted() &&
          r.events.back().terminal().finish_reason() == v1::FINISH_STOP && text == "Hi. Bye.") {
        ++good;
      }
    });
  }
  auto in_flight = [&] {
    int n = 0;
    for (auto& w : workers) n += w->active_requests();
    return n;
  };
  EXPECT_TRUE(workers[0]->WaitFor([&] { return in_flight() == kStreams; }, 60000));
  for (auto& w : workers) w->OpenGate();
  for (auto& t : clients) t.join();
  EXPECT_EQ(good.load(), kStreams);
}

TEST_F(GrpcGatewayTest, CancelReachesARequestStartedOverHttp) {
  worker_->SetScript({FakeStep::Text("partial"), FakeStep::Hang()});
  auto client = http::TestHttpClient::Connect(router_->port());
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(client->SendRequest(
      "POST", "/v1/chat/completions",
      absl::StrCat(R"({"model":")", kModel,
                   R"(","stream":true,"messages":[{"role":"user","content":"hi"}]})"),
      {{"Authorization", "Bearer k-dev"}, {"Content-Type", "application/json"}}).ok());
  bool cancelled = false;
  auto response = client->ReadResponse(10000, [&](absl::string_view chunk) {
    if (!cancelled && absl::StrContains(chunk, "partial")) {
      EXPECT_EQ(worker_->requests().size(), 1u);
      cancelled = CancelAs("k-dev", worker_->requests()[0].request_id());
    }
    return true;
  });
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_TRUE(cancelled);
  EXPECT_TRUE(absl::StrContains(response->body, R"("code":"cancelled")")) << response->body;
  EXPECT_TRUE(worker_->WaitFor([&] { return worker_->cancels_received().size() == 1; }, 5000));
}

// A tool call the policy denies never reaches a gRPC client either: the stream ends
// with one Terminal carrying tool_call_denied and the rule, and no ToolCallEvent.
TEST_F(GrpcGatewayTest, ADeniedToolCallEndsTheStreamWithTheRule) {
  StartWorker({FakeStep::Text("Let me look."),
               FakeStep::ToolCall("write_file", R"({"path":"/etc/passwd"})"),
               FakeStep::Finish(v1::FINISH_TOOL_CALLS)});
  v1::ChatRequest chat = Request();
  v1::ToolDefinition* tool = chat.mutable_request()->add_tools();
  tool->set_name("read_file");
  ChatResult r = Chat(chat);
  ASSERT_FALSE(r.events.empty());
  for (const v1::StreamEvent& e : r.events) EXPECT_FALSE(e.has_tool_call());
  ASSERT_TRUE(r.events.back().has_terminal());
  EXPECT_EQ(r.events.back().terminal().finish_reason(), v1::FINISH_ERROR);
  EXPECT_EQ(r.events.back().terminal().status().reason(), "tool_call_denied");
  EXPECT_NE(r.events.back().terminal().status().message().find("rule default_deny (tool_not_granted)"),
            std::string::npos)
      << r.events.back().terminal().status().message();
}

TEST_F(GrpcGatewayTest, AClientThatGoesAwayCancelsOnTheWorker) {
  worker_->SetScript({FakeStep::Text("partial"), FakeStep::Hang()});
  grpc::ClientContext ctx;
  Authorize(&ctx, "k-dev");
  auto reader = stub_->Chat(&ctx, Request());
  v1::StreamEvent event;
  std::string id;
  while (reader->Read(&event) && !event.has_text()) id = event.request_id();
  ASSERT_TRUE(event.has_text());
  ctx.TryCancel();
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(worker_->WaitFor([&] { return worker_->cancels_received().size() == 1; }, 5000));
  EXPECT_EQ(worker_->cancels_received()[0], id);
}

TEST_F(GrpcGatewayTest, AccessibilityAdmittedBeforeAnyTokenThenSentences) {
  // The worker holds every token at the gate until the client has the admitted event.
  worker_->SetScript({FakeStep::Gate(), FakeStep::Text("Hel"), FakeStep::Text("lo there."),
               FakeStep::Text(" How"), FakeStep::Text(" are you?"),
               FakeStep::Finish(v1::FINISH_STOP)});
  ChatResult r = Chat(Request(), "k-ada", [&](const v1::StreamEvent& e) {
    if (e.has_admitted()) {
      EXPECT_EQ(e.admitted().priority(), v1::PRIORITY_ACCESSIBILITY);
      worker_->OpenGate();
    }
  });
  ExpectWellFormed(r);
  std::vector<std::string> texts;
  for (const auto& e : r.events) {
    if (e.has_text()) texts.push_back(e.text().text());
  }
  EXPECT_EQ(texts, (std::vector<std::string>{"Hello there. ", "How are you?"}));
  EXPECT_EQ(worker_->requests()[0].priority(), v1::PRIORITY_ACCESSIBILITY);
}

// An open sentence is held back, but not past a silence of kSentenceHoldMaxMs: the
// stream releases it although no further event arrives to make it look. Here the
// worker goes on only once the client has that text.
TEST_F(GrpcGatewayTest, AccessibilityReleasesAHeldSentenceAfterASilence) {
  worker_->SetScript({FakeStep::Text("Thinking about"), FakeStep::Gate(), FakeStep::Text(" it."),
                      FakeStep::Finish(v1::FINISH_STOP)});
  ChatResult r = Chat(Request(), "k-ada", [&](const v1::StreamEvent& e) {
    if (e.has_text()) worker_->OpenGate();
  });
  ExpectWellFormed(r);
  std::vector<std::string> texts;
  for (const auto& e : r.events) {
    if (e.has_text()) texts.push_back(e.text().text());
  }
  EXPECT_EQ(texts, (std::vector<std::string>{"Thinking ", "about it."}))
      << absl::StrJoin(texts, "|");
}

TEST_F(GrpcGatewayTest, TlsWithTheHttpListenersFiles) {
  const char* tmpdir = std::getenv("TEST_TMPDIR");  // Bazel sets it
  ASSERT_NE(tmpdir, nullptr);
  std::string dir = tmpdir;
  std::string cert = dir + "/grpc-cert.pem", key = dir + "/grpc-key.pem";
  ASSERT_EQ(std::system(absl::StrCat("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 "
                                     "-nodes -days 1 -subj /CN=127.0.0.1 -addext "
                                     "subjectAltName=IP:127.0.0.1 -keyout ", key, " -out ", cert,
                                     " >/dev/null 2>&1").c_str()), 0);
  GrpcGatewayOptions options;
  options.tls_cert_path = cert;
  options.tls_key_path = key;
  auto tls = GrpcGateway::Start(router_->gateway(), options);
  ASSERT_TRUE(tls.ok()) << tls.status();
  grpc::SslCredentialsOptions trust;
  trust.pem_root_certs = ReadFileToString(cert).value();
  auto stub = v1::Gateway::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", (*tls)->port()), grpc::SslCredentials(trust)));
  grpc::ClientContext ctx;
  Authorize(&ctx, "k-dev");
  v1::ListModelsResponse response;
  grpc::Status status = stub->ListModels(&ctx, {}, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.models_size(), 2);

  options.tls_key_path = cert;  // not a key
  auto bad = GrpcGateway::Start(router_->gateway(), options);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(ReasonOf(bad.status()), "invalid_tls_config");
}

}  // namespace
}  // namespace gantry::router
