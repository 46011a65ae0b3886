#include "harness-svc/router_client.h"

#include <chrono>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
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

// The JSON of one SSE event's `data:` line ("" for comments and other fields).
absl::string_view SseData(absl::string_view event) {
  for (absl::string_view line : absl::StrSplit(event, '\n')) {
    line = absl::StripSuffix(line, "\r");
    if (absl::ConsumePrefix(&line, "data:")) return absl::StripLeadingAsciiWhitespace(line);
  }
  return "";
}

// choices[0].delta of a chunk, or null.
const json::Value* DeltaOf(const json::Value& chunk) {
  const json::Value* choices = chunk.Find("choices");
  if (!choices || !choices->is_array() || choices->items().empty()) return nullptr;
  const json::Value* delta = choices->items()[0].Find("delta");
  return delta && delta->is_object() ? delta : nullptr;
}

bool NonEmptyString(const json::Value* v) { return v && v->is_string() && !v->as_string().empty(); }

// Usage of a chat.completion or of the last chunk; false when absent or malformed.
bool ReadUsage(const json::Value& doc, ModelReply* r) {
  const json::Value* usage = doc.Find("usage");
  if (!usage || !usage->is_object()) return false;
  const json::Value* p = usage->Find("prompt_tokens");
  const json::Value* c = usage->Find("completion_tokens");
  if (p && c && p->as_int64() && c->as_int64() && *p->as_int64() >= 0 && *c->as_int64() >= 0) {
    r->usage_known = true;
    r->prompt_tokens = *p->as_int64();
    r->completion_tokens = *c->as_int64();
    const json::Value* ids = usage->Find("gantry_prompt_ids_sha256");
    if (ids && ids->is_string() && ids->as_string().size() == 64) r->prompt_ids_sha256 = ids->as_string();
    return true;
  }
  return false;
}

}  // namespace

bool IsFirstTokenEvent(absl::string_view event) {
  auto doc = json::Parse(SseData(event));
  if (!doc.ok() || !doc->is_object()) return false;
  const json::Value* delta = DeltaOf(*doc);
  if (delta == nullptr) return false;
  const json::Value* calls = delta->Find("tool_calls");
  return NonEmptyString(delta->Find("content")) || NonEmptyString(delta->Find("reasoning_content")) ||
         (calls && calls->is_array() && !calls->items().empty());
}

absl::StatusOr<ModelReply> ParseChatStream(absl::string_view body) {
  ModelReply r;
  bool done = false;
  std::map<int64_t, ModelToolCall> calls;  // by index, in index order
  for (absl::string_view event : absl::StrSplit(body, "\n\n", absl::SkipWhitespace())) {
    absl::string_view data = SseData(event);
    if (data.empty()) continue;
    if (data == "[DONE]") {
      done = true;
      break;
    }
    auto doc = json::Parse(data);
    if (!doc.ok() || !doc->is_object()) return Malformed("an event that is not a JSON object");
    if (const json::Value* err = doc->Find("error"); err && err->is_object()) {
      const json::Value* code = err->Find("code");
      const json::Value* msg = err->Find("message");
      return Error(absl::StatusCode::kInternal, code && code->is_string() ? code->as_string() : "internal",
                   absl::StrCat("the stream ended with an error: ",
                                msg && msg->is_string() ? msg->as_string() : "(no message)"));
    }
    if (const json::Value* id = doc->Find("id"); id && id->is_string()) r.request_id = id->as_string();
    ReadUsage(*doc, &r);
    const json::Value* choices = doc->Find("choices");
    if (!choices || !choices->is_array()) return Malformed("a chunk without choices");
    if (choices->items().empty()) continue;  // the usage chunk
    const json::Value& choice = choices->items()[0];
    if (const json::Value* f = choice.Find("finish_reason"); f && f->is_string()) r.finish_reason = f->as_string();
    const json::Value* delta = DeltaOf(*doc);
    if (delta == nullptr) return Malformed("choices[0].delta");
    if (const json::Value* c = delta->Find("content"); c && c->is_string()) {
      r.content += c->as_string();
    } else if (c && !c->is_null()) {
      return Malformed("delta.content");
    }
    const json::Value* deltas = delta->Find("tool_calls");
    if (deltas == nullptr || deltas->is_null()) continue;
    if (!deltas->is_array()) return Malformed("delta.tool_calls");
    for (const auto& d : deltas->items()) {
      const json::Value* index = d.Find("index");
      if (!index || !index->as_int64() || *index->as_int64() < 0 || *index->as_int64() > 4096) {
        return Malformed("delta.tool_calls[].index");
      }
      ModelToolCall& call = calls[*index->as_int64()];
      if (const json::Value* id = d.Find("id"); id && id->is_string()) call.id = id->as_string();
      const json::Value* fn = d.Find("function");
      if (fn && fn->is_object()) {
        if (const json::Value* name = fn->Find("name"); name && name->is_string()) call.name += name->as_string();
        if (const json::Value* args = fn->Find("arguments"); args && args->is_string()) {
          call.arguments_json += args->as_string();
        }
      }
    }
  }
  if (!done) return Malformed("the stream ended before data: [DONE]");
  for (auto& [index, call] : calls) {
    if (call.id.empty() || call.name.empty()) return Malformed("a tool call without id or function.name");
    r.tool_calls.push_back(std::move(call));
  }
  return r;
}

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
  ReadUsage(*doc, &r);
  if (const json::Value* fp = doc->Find("system_fingerprint"); fp && fp->is_string()) {
    r.system_fingerprint = fp->as_string();
  }
  if (const json::Value* id = doc->Find("id"); id && id->is_string()) r.request_id = id->as_string();
  return r;
}

absl::StatusOr<ModelReply> RouterClient::Complete(const json::Value& body, int timeout_ms) {
  json::Value streamed = body;
  streamed.Set("stream", json::Value::Bool(true));
  json::Value stream_options = json::Value::EmptyObject();
  stream_options.Set("include_usage", json::Value::Bool(true));
  streamed.Set("stream_options", std::move(stream_options));
  HttpRequest req;
  req.url = absl::StrCat(base_url_, "/v1/chat/completions");
  req.headers = {{"Authorization", absl::StrCat("Bearer ", api_key_)},
                 {"Content-Type", "application/json"}};
  req.body = json::DumpCompact(streamed);
  req.timeout_ms = timeout_ms;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  auto micros_since_start = [start] {
    return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
  };
  int64_t first_token_us = -1;
  size_t scanned = 0;  // body bytes whose complete events were looked at
  req.on_body = [&](absl::string_view so_far) {
    while (first_token_us < 0) {
      size_t end = so_far.find("\n\n", scanned);
      if (end == absl::string_view::npos) return;
      absl::string_view event = so_far.substr(scanned, end - scanned);
      scanned = end + 2;
      if (IsFirstTokenEvent(event)) first_token_us = micros_since_start();
    }
  };
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
  auto reply = ParseChatStream(resp->body);
  if (!reply.ok()) return reply.status();
  std::string rid = resp->Header("x-gantry-request-id");
  if (!rid.empty()) reply->request_id = rid;
  // Stream chunks carry no system_fingerprint; the router sends the bundle in a header.
  reply->system_fingerprint = resp->Header("x-gantry-bundle-sha256");
  reply->first_token_us = first_token_us;
  reply->response_us = micros_since_start();
  return reply;
}

}  // namespace gantry::harness
