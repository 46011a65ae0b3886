#include "tokenizer-svc/service/tokenizer_service.h"

#include <sys/stat.h>

#include <zmq.hpp>

#include "absl/strings/str_cat.h"
#include "common/error_codes.h"
#include "common/log.h"
#include "common/sha256.h"
#include "common/status.h"
#include "common/zmq_io.h"
#include "formats/bundle/bundle.h"
#include "tokenizer-svc/bundle_text/bundle_text.h"
#include "tokenizer-svc/conversation/conversation.h"
#include "tokenizer-svc/conversation/prompt.h"

namespace gantry::tokenizer_service {
namespace {

// What one request may make the service do and answer (found by a red team: a 50 MB
// Detokenize of 12.5 million ids of 128 spaces each made a 1.6 GB answer, 9.6 GB of
// memory and 39 s of the only thread). More ids than any model's context, and text of
// the size a request may carry.
constexpr size_t kMaxIds = size_t{1} << 18;
constexpr size_t kMaxTextBytes = size_t{16} << 20;
constexpr int64_t kMaxRequestBytes = int64_t{16} << 20;
// Answers queued for one peer that does not read them: past this many, libzmq's ROUTER
// drops new ones for that peer instead of holding them.
constexpr int kMaxQueuedAnswers = 8;

absl::Status TextWithinBound(const std::string& text) {
  if (text.size() <= kMaxTextBytes) return absl::OkStatus();
  return ReasonError("invalid_request", absl::StrCat("the answer would hold ", text.size(),
                                                     " bytes of text; at most ", kMaxTextBytes));
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

absl::StatusOr<ServedModel> LoadServedModel(const std::string& dir) {
  ServedModel m;
  if (Exists(dir + "/bundle.json")) {
    GANTRY_ASSIGN_OR_RETURN(bundle::Bundle b, bundle::LoadAndVerify(dir));
    GANTRY_ASSIGN_OR_RETURN(auto gguf, bundle::OpenGguf(b.WeightsPath()));
    GANTRY_ASSIGN_OR_RETURN(bundle_text::BundleText text, bundle_text::LoadBundleText(b, *gguf));
    m.tokenizer = std::move(text.tokenizer);
    m.chat_template = std::move(text.chat_template);
    return m;
  }
  GANTRY_ASSIGN_OR_RETURN(m.tokenizer, tokenizer::Tokenizer::Load(dir));
  auto t = jinja::ChatTemplate::Load(dir);
  if (t.ok()) m.chat_template = std::make_unique<jinja::ChatTemplate>(std::move(*t));
  return m;
}

TokenizerService::TokenizerService(std::map<std::string, ServedModel> models)
    : models_(std::move(models)) {}

v1::TokenizerResponse TokenizerService::Handle(const v1::TokenizerRequest& request) const {
  v1::TokenizerResponse response;
  response.set_request_id(request.request_id());
  auto fail = [&](const absl::Status& s) {
    ToProto(s, response.mutable_status());
    return response;
  };
  auto it = models_.find(request.model());
  if (it == models_.end()) {
    return fail(ReasonError("model_not_found", absl::StrCat("no model '", request.model(), "' here")));
  }
  const ServedModel& m = it->second;
  auto render = [&](const v1::InferenceRequest& r) -> absl::StatusOr<std::string> {
    if (!m.chat_template) {
      return ReasonError("template_render_failed", "this model has no chat template");
    }
    if (r.messages_size() == 0) return ReasonError("invalid_request", "no messages");
    return m.chat_template->Render(conversation::TemplateConversation(r));
  };
  switch (request.op_case()) {
    case v1::TokenizerRequest::kTokenize: {
      tokenizer::EncodeOptions options;
      options.add_special = request.tokenize().add_special();
      options.split_special = request.tokenize().split_special();
      options.max_ids = kMaxIds;
      auto ids = m.tokenizer->Encode(request.tokenize().text(), options);
      if (!ids.ok()) return fail(ids.status());
      for (int32_t id : *ids) response.add_ids(id);
      response.set_ids_sha256(TokenIdsSha256Hex(*ids));
      break;
    }
    case v1::TokenizerRequest::kDetokenize: {
      if (static_cast<size_t>(request.detokenize().ids_size()) > kMaxIds) {
        return fail(ReasonError("invalid_request", absl::StrCat("at most ", kMaxIds, " ids to detokenize")));
      }
      std::vector<int32_t> ids(request.detokenize().ids().begin(), request.detokenize().ids().end());
      auto text = m.tokenizer->Decode(ids, request.detokenize().skip_special());
      if (!text.ok()) return fail(text.status());
      if (absl::Status bound = TextWithinBound(*text); !bound.ok()) return fail(bound);
      response.set_text(*text);
      break;
    }
    case v1::TokenizerRequest::kRender: {
      auto text = render(request.render());
      if (!text.ok()) return fail(text.status());
      if (absl::Status bound = TextWithinBound(*text); !bound.ok()) return fail(bound);
      response.set_text(*text);
      break;
    }
    case v1::TokenizerRequest::kCount: {
      if (!m.chat_template) {
        return fail(ReasonError("template_render_failed", "this model has no chat template"));
      }
      if (request.count().messages_size() == 0) return fail(ReasonError("invalid_request", "no messages"));
      auto prompt = conversation::BuildPrompt(*m.chat_template, *m.tokenizer, request.count(),
                                              /*tools_cache=*/nullptr, kMaxIds);
      if (!prompt.ok()) return fail(prompt.status());
      response.set_count(static_cast<uint32_t>(prompt->ids.size()));
      response.set_ids_sha256(TokenIdsSha256Hex(prompt->ids));
      break;
    }
    default:
      return fail(ReasonError("invalid_request", "the request names no operation"));
  }
  ToProto(absl::OkStatus(), response.mutable_status());
  return response;
}

std::string TokenizerService::endpoint() const {
  std::lock_guard<std::mutex> lock(endpoint_mu_);
  return endpoint_;
}

absl::Status TokenizerService::Serve(const std::string& endpoint) {
  zmq::context_t context;
  SeedRouterIdentities();
  zmq::socket_t socket(context, zmq::socket_type::router);
  socket.set(zmq::sockopt::linger, 0);
  // Bounded before buffered: libzmq disconnects a peer that announces a frame larger
  // than a whole request may be (the RecvLimits below), before buffering any of it.
  socket.set(zmq::sockopt::maxmsgsize, kMaxRequestBytes);
  socket.set(zmq::sockopt::sndhwm, kMaxQueuedAnswers);
  try {
    socket.bind(endpoint);
  } catch (const zmq::error_t& e) {
    return absl::UnavailableError(absl::StrCat("bind ", endpoint, ": ", e.what()));
  }
  {
    std::lock_guard<std::mutex> lock(endpoint_mu_);
    endpoint_ = LastEndpoint(socket);
  }
  Log(LogLevel::kInfo, "tokenizer.serving", {{"endpoint", this->endpoint()}});
  RecvLimits limits;
  limits.max_frames = 3;
  limits.max_total_bytes = kMaxRequestBytes;
  while (!stop_.load()) {
    auto frames = RecvFrames(socket, 100, limits);
    if (!frames.ok()) {
      if (!absl::IsDeadlineExceeded(frames.status())) ++dropped_;
      continue;
    }
    auto split = SplitRouterEnvelope(*std::move(frames));  // REQ or DEALER peers
    if (!split.ok()) {
      ++dropped_;
      continue;
    }
    std::vector<std::string> reply = std::move(split->envelope);
    v1::TokenizerRequest request;
    v1::TokenizerResponse response;
    if (!request.ParseFromString(split->body)) {
      ++dropped_;
      ToProto(ReasonError("protocol_error", "the body is not a gantry.v1.TokenizerRequest"),
              response.mutable_status());
    } else {
      response = Handle(request);
    }
    reply.push_back(response.SerializeAsString());
    (void)SendFrames(socket, reply);
  }
  return absl::OkStatus();
}

}  // namespace gantry::tokenizer_service
