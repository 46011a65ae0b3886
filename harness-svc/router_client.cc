#include "harness-svc/router_client.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "harness-svc/http_client.h"

namespace gantry::harness {
namespace {

absl::Status Malformed(absl::string_view what) {
  return Error(absl::StatusCode::kDataLoss, "protocol_error",
               absl::StrCat("the router's reply is not a chat.completion: ", what));
}

absl::StatusCode CodeForHttp(int status) {
  switch (status) {
    case 400: case 413: case 422: return absl::StatusCode::kInvalidArgument;
    case 401: return absl::StatusCode::kUnauthenticated;
    case 403: return absl::StatusCode::kPermissionDenied;
    case 404: return absl::StatusCode::kNotFound;
    case 429: return absl::StatusCode::kResourceExhausted;
    case 501: return absl::StatusCode::kUnimplemented;
    case 503: return absl::StatusCode::kUnavailable;
    case 504: return absl::StatusCode::kDeadlineExceeded;
    default: return absl::StatusCode::kInternal;
  }
}

}  // namespace

absl::StatusOr<ModelReply> ParseChatCompletion(const std::string& body) {
  auto doc = json::Parse(body);
  if (!doc.ok()) return Malformed(doc.status().message());
  if (!doc->is_object()) return Malformed("not a JSON object");
  const json::Value* choices = doc->Find("choices");
  if (!choices || !choices->is_array() || choices->items().size() != 1) return Malformed("choices");
  const json::Value& choice = choices->items()[0];
  const json::Value* message = choice.Find("message");
  const json::Value* finish = choice.Find("finish_reason");
  if (!message || !message->is_object()) return Malformed("choices[0].message");
  ModelReply r;
  if (finish && finish->is_string()) r.finish_reason = finish->as_string();
  const json::Value* content = message->Find("content");
  if (content && content->is_string()) {
    r.content = content->as_string();
  } else if (content && !content->is_null()) {
    return Malformed("message.content");
  }
  if (const json::Value* calls = message->Find("tool_calls"); calls && !calls->is_null()) {
    if (!calls->is_array()) return Malformed("message.tool_calls");
    for (const auto& c : calls->items()) {
      const json::Value* id = c.Find("id");
      const json::Value* fn = c.Find("function");
      const json::Value* name = fn ? fn->Find("name") : nullptr;
      const json::Value* args = fn ? fn->Find("arguments") : nullptr;
      if (!id || !id->is_string() || id->as_string().empty() || !name || !name->is_string() || !args ||
          !args->is_string()) {
        return Malformed("message.tool_calls[]: id, function.name and function.arguments");
      }
      r.tool_calls.push_back({id->as_string(), name->as_string(), args->as_string()});
    }
  }
  if (const json::Value* usage = doc->Find("usage"); usage && usage->is_object()) {
    const json::Value* p = usage->Find("prompt_tokens");
    const json::Value* c = usage->Find("completion_tokens");
    if (p && c && p->as_int64() && c->as_int64() && *p->as_int64() >= 0 && *c->as_int64() >= 0) {
      r.usage_known = true;
      r.prompt_tokens = *p->as_int64();
      r.completion_tokens = *c->as_int64();
    }
  }
  if (const json::Value* fp = doc->Find("system_fingerprint"); fp && fp->is_string()) {
    r.system_fingerprint = fp->as_string();
  }
  if (const json::Value* id = doc->Find("id"); id && id->is_string()) r.request_id = id->as_string();
  return r;
}

absl::StatusOr<ModelReply> RouterClient::Complete(const json::Value& body, int timeout_ms) {
  HttpRequest req;
  req.url = absl::StrCat(base_url_, "/v1/chat/completions");
  req.headers = {{"Authorization", absl::StrCat("Bearer ", api_key_)},
                 {"Content-Type", "application/json"}};
  req.body = json::DumpCompact(body);
  req.timeout_ms = timeout_ms;
  auto resp = SendHttp(req);
  if (!resp.ok()) return resp.status();
  if (resp->status != 200) {
    std::string reason = "internal", message = resp->body.substr(0, 2000);
    auto doc = json::Parse(resp->body);
    if (doc.ok() && doc->is_object()) {
      const json::Value* err = doc->Find("error");
      if (err && err->is_object()) {
        const json::Value* code = err->Find("code");
        const json::Value* msg = err->Find("message");
        if (code && code->is_string()) reason = code->as_string();
        if (msg && msg->is_string()) message = msg->as_string();
      }
    }
    return Error(CodeForHttp(resp->status), reason,
                 absl::StrCat("HTTP ", resp->status, " ", reason, ": ", message));
  }
  auto reply = ParseChatCompletion(resp->body);
  if (!reply.ok()) return reply.status();
  std::string rid = resp->Header("x-gantry-request-id");
  if (!rid.empty()) reply->request_id = rid;
  return reply;
}

}  // namespace gantry::harness
