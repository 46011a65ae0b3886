// gantry.v1.StreamEvents -> OpenAI Chat Completions responses.
//
// ChatStreamRenderer turns events into SSE `data:` lines of chat.completion.chunk
// objects as they arrive: the first chunk carries `delta.role: "assistant"`; text and
// reasoning deltas (`content`, `reasoning_content`); each tool call is ONE delta carrying
// index, id, type "function", function.name and the complete arguments (workers only
// send complete, validated calls; OpenCode aborts when a first tool-call delta lacks any
// of these); then a chunk with the finish_reason; then, with include_usage, a chunk with
// `choices: []` and `usage`; then `data: [DONE]`. A terminal error becomes one
// `data: {"error": {...}}` event and no [DONE], so a client never mistakes a failed
// stream for a complete one.
//
// ChatCompletionAccumulator collects the same events into one chat.completion object.
// Both are built from the same event -> fields mapping, so the streamed and
// non-streamed renderings of an event sequence agree (tested).
//
// finish_reason: FINISH_STOP "stop", FINISH_LENGTH "length", FINISH_TOOL_CALLS
// "tool_calls"; FINISH_ERROR and FINISH_CANCELLED are errors, not finish reasons.
//
// Thread-safety: one object per response; not thread-safe.
#ifndef GANTRY_ROUTER_OPENAI_CHAT_RESPONSE_H_
#define GANTRY_ROUTER_OPENAI_CHAT_RESPONSE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/json.h"
#include "gantry/v1/inference.pb.h"

namespace gantry::openai {

struct ResponseMeta {
  std::string id;         // "chatcmpl-..."
  std::string model;
  int64_t created = 0;    // Unix seconds
};

// "chatcmpl-<hex>" from a router request id "req_<hex>".
std::string CompletionIdFor(const std::string& request_id);

// "stop", "length", "tool_calls"; "" for the others.
const char* FinishReasonName(v1::FinishReason reason);

// The OpenAI usage object (prompt/completion/total tokens and details).
json::Value UsageJson(const v1::Usage& usage);

// The failure a Terminal carries (OK for a successful finish).
absl::Status TerminalStatus(const v1::Terminal& terminal);

class ChatStreamRenderer {
 public:
  ChatStreamRenderer(ResponseMeta meta, bool include_usage);
  // SSE text for one event ("" when it produces no chunk). After a Terminal, further
  // events produce nothing.
  std::string OnEvent(const v1::StreamEvent& event);
  bool finished() const { return finished_; }

 private:
  std::string Chunk(json::Value delta, const char* finish_reason);
  std::string RoleChunkIfFirst();

  ResponseMeta meta_;
  bool include_usage_;
  bool sent_role_ = false;
  bool finished_ = false;
};

class ChatCompletionAccumulator {
 public:
  explicit ChatCompletionAccumulator(ResponseMeta meta);
  void Add(const v1::StreamEvent& event);
  bool finished() const { return finished_; }
  // The failure after an error Terminal; OK otherwise.
  const absl::Status& error() const { return error_; }
  // The chat.completion object. Precondition: finished() and error().ok().
  json::Value ToJson() const;

 private:
  ResponseMeta meta_;
  std::string content_;
  std::string reasoning_;
  std::vector<v1::ToolCallEvent> calls_;
  v1::Terminal terminal_;
  bool finished_ = false;
  absl::Status error_;
};

// One served model as /v1/models lists it.
struct ModelListing {
  std::string id;
  uint32_t context_length = 0;      // the bundle's context capacity in tokens
  uint32_t default_max_tokens = 0;  // the output cap when a request sets none
};

// GET /v1/models: {"object": "list", "data": [{"id", "object": "model", "created",
// "owned_by": "gantry", "context_length", "max_output_tokens"}, ...]}. The last two are
// Gantry's additions (clients such as OpenCode read a context length to budget turns).
json::Value ModelListJson(const std::vector<ModelListing>& models, int64_t created);

}  // namespace gantry::openai

#endif  // GANTRY_ROUTER_OPENAI_CHAT_RESPONSE_H_
