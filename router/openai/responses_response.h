// gantry.v1.StreamEvents -> OpenAI Responses API objects and streamed events.
//
// One ResponsesRenderer per request serves both modes, so the streamed and the
// non-streamed results of an event sequence are the same object (tested):
//   - streamed: Start() gives `response.created` and `response.in_progress`; OnEvent()
//     gives the events each worker event causes; the terminal event gives the closing
//     events of the open output item and then exactly one of `response.completed`
//     (finish stop / tool_calls), `response.incomplete` (finish length,
//     incomplete_details.reason "max_output_tokens") or `response.failed`
//     (response.error {code: the Gantry reason, message}). Each SSE event is
//     "event: TYPE\ndata: {JSON with type and sequence_number}\n\n"; there is no
//     [DONE] sentinel, as in OpenAI's API.
//   - non-streamed: feed every event to OnEvent() (ignore the text), then ResponseJson().
//
// Output items, in the order the worker produced them:
//   reasoning      {type: reasoning, id: rs_..., summary: [], content: [{type:
//                  reasoning_text, text}], encrypted_content (below)}; events output_item.added,
//                  reasoning_text.delta..., reasoning_text.done, output_item.done
//   message        {type: message, id: msg_..., role: assistant, status, content:
//                  [{type: output_text, text, annotations: []}]}; events
//                  output_item.added, content_part.added, output_text.delta...,
//                  output_text.done, content_part.done, output_item.done
//   function_call  {type: function_call, id: fc_..., call_id (the server-issued
//                  call_... id), name, arguments, status}; events output_item.added
//                  (name and call_id, arguments ""), ONE function_call_arguments.delta
//                  with the complete arguments (workers send only complete, validated
//                  calls), function_call_arguments.done, output_item.done
// usage: {input_tokens, input_tokens_details.cached_tokens, output_tokens,
// output_tokens_details.reasoning_tokens, total_tokens}.
//
// Thread-safety: one object per response; not thread-safe.
#ifndef GANTRY_ROUTER_OPENAI_RESPONSES_RESPONSE_H_
#define GANTRY_ROUTER_OPENAI_RESPONSES_RESPONSE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/json.h"
#include "gantry/v1/inference.pb.h"

namespace gantry::openai {

// Reasoning items carry their text a second time in `encrypted_content` as
// "gantry-reasoning.v1." + base64(text). It is NOT encrypted (the text is the client's
// own output, already sent in `content`); it exists because stateless clients (Qwen
// Code) replay a reasoning item only when it has an `encrypted_content`, and otherwise
// turn the reasoning into visible assistant text. responses_request.h reads it back.
inline constexpr absl::string_view kReasoningCarrierPrefix = "gantry-reasoning.v1.";
std::string EncodeReasoningCarrier(const std::string& reasoning);
// False when `carrier` is not one of ours (another server's opaque blob) or is not
// valid base64.
bool DecodeReasoningCarrier(absl::string_view carrier, std::string* reasoning);

// "resp_<hex>" from a router request id "req_<hex>".
std::string ResponseIdFor(const std::string& request_id);

class ResponsesRenderer {
 public:
  // `echo`: the request fields the response object repeats (ResponsesRequest::echo).
  ResponsesRenderer(std::string id, std::string model, int64_t created_at, json::Value echo);

  // The SSE text of response.created and response.in_progress.
  std::string Start();
  // The SSE text `event` causes ("" for none). After a Terminal, nothing.
  std::string OnEvent(const v1::StreamEvent& event);

  bool finished() const { return finished_; }
  // The failure of an error Terminal; OK otherwise.
  const absl::Status& error() const { return error_; }
  // The response object as it stands (status in_progress until the Terminal).
  json::Value ResponseJson() const;

 private:
  enum class Open { kNone, kReasoning, kMessage };
  std::string Event(const char* type, json::Value fields);
  std::string CloseOpenItem();
  std::string OpenItem(Open kind);
  std::string ItemId(const char* prefix, size_t index) const;
  json::Value ReasoningItem(const std::string& status) const;
  json::Value MessageItem(const std::string& status) const;

  std::string id_;
  std::string model_;
  int64_t created_at_;
  json::Value echo_;
  uint64_t sequence_ = 0;
  std::string status_ = "in_progress";
  std::vector<json::Value> output_;  // closed items
  Open open_ = Open::kNone;
  std::string open_text_;           // text of the open reasoning or message item
  v1::Terminal terminal_;
  bool finished_ = false;
  absl::Status error_;
};

}  // namespace gantry::openai

#endif  // GANTRY_ROUTER_OPENAI_RESPONSES_RESPONSE_H_
