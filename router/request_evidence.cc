#include "router/request_evidence.h"

#include "common/sha256.h"
#include "common/utf8.h"
#include "router/http/error_response.h"
#include "router/openai/chat_response.h"

namespace gantry::router {
namespace {

using json::Value;

// "QwenCode/0.24.4 (linux; x64)" -> {name: QwenCode, version: 0.24.4}: the first
// product token of the User-Agent (RFC 9110 section 10.1.5).
Value ClientOf(absl::string_view user_agent) {
  absl::string_view product = user_agent.substr(0, user_agent.find(' '));
  size_t slash = product.find('/');
  Value client = Value::EmptyObject();
  client.Set("name", Value::String(std::string(product.substr(0, slash))));
  client.Set("version", Value::String(slash == absl::string_view::npos
                                          ? std::string()
                                          : std::string(product.substr(slash + 1))));
  return client;
}

Value Millis(int64_t us) { return us < 0 ? Value() : Value::Double(us / 1000.0); }

}  // namespace

std::string PromptIdsSha256Hex(const std::vector<int32_t>& ids) {
  std::string bytes(ids.size() * 4, '\0');
  for (size_t i = 0; i < ids.size(); ++i) {
    const uint32_t u = static_cast<uint32_t>(ids[i]);
    bytes[4 * i] = static_cast<char>(u & 0xff);  // little-endian, as TokenIdsSha256Hex
    bytes[4 * i + 1] = static_cast<char>((u >> 8) & 0xff);
    bytes[4 * i + 2] = static_cast<char>((u >> 16) & 0xff);
    bytes[4 * i + 3] = static_cast<char>(u >> 24);
  }
  return Sha256Hex(bytes);
}

RequestEvidence::RequestEvidence(const v1::InferenceRequest& request,
                                 const RenderedPrompt& rendered, absl::string_view api,
                                 absl::string_view user_agent, int64_t received_unix_us)
    : record_(Value::EmptyObject()), received_us_(received_unix_us) {
  record_.Set("api", Value::String(std::string(api)));
  // A client names itself in a few dozen bytes; the header may be 64 KiB.
  constexpr size_t kMaxUserAgentBytes = 256;
  user_agent = Utf8Prefix(user_agent, kMaxUserAgentBytes);
  record_.Set("user_agent", Value::String(std::string(user_agent)));
  record_.Set("client", ClientOf(user_agent));
  record_.Set("received_unix_us", Value::Int(received_unix_us));
  record_.Set("gen_ai.request.model", Value::String(request.model()));
  record_.Set("prompt_tokens", Value::Int(rendered.tokens));
  record_.Set("prompt_token_ids_sha256", Value::String(rendered.token_ids_sha256));
  record_.Set("rendered_prompt_sha256", Value::String(Sha256Hex(rendered.text)));
  Value tools = Value::EmptyArray();
  for (const auto& tool : request.tools()) tools.Append(Value::String(tool.name()));
  record_.Set("tools", std::move(tools));
  record_.Set("max_output_tokens", Value::Int(request.max_tokens()));
  // The ids of the tool results it carries (each bounded by request_names.h), at most
  // kMaxRecordedResults of them, with the count of the rest.
  constexpr int kMaxRecordedResults = 256;
  Value results = Value::EmptyArray();
  int64_t more_results = 0;
  for (const auto& m : request.messages()) {
    if (m.role() != "tool") continue;
    if (static_cast<int>(results.items().size()) < kMaxRecordedResults) {
      results.Append(Value::String(m.tool_call_id()));
    } else {
      ++more_results;
    }
  }
  // The rendered prompt only for a turn that carries tool results (the turn after a
  // call, whose rendering is the one to check), its first kMaxRecordedPromptBytes (cut
  // on a character boundary) with its full size; its hash always.
  constexpr size_t kMaxRecordedPromptBytes = 256u << 10;
  if (!results.items().empty()) {
    const absl::string_view text = Utf8Prefix(rendered.text, kMaxRecordedPromptBytes);
    if (text.size() < rendered.text.size()) {
      record_.Set("rendered_prompt_bytes", Value::Int(static_cast<int64_t>(rendered.text.size())));
    }
    record_.Set("rendered_prompt", Value::String(std::string(text)));
  }
  record_.Set("tool_results", std::move(results));
  if (more_results > 0) record_.Set("tool_results_not_listed", Value::Int(more_results));
}

void RequestEvidence::Observe(const v1::StreamEvent& event, int64_t now_unix_us) {
  const int64_t since = now_unix_us - received_us_;
  if (event.has_text() || event.has_reasoning() || event.has_tool_call()) {
    if (first_output_us_ < 0) first_output_us_ = since;
  }
  if (event.has_tool_call()) {
    if (first_tool_call_us_ < 0) first_tool_call_us_ = since;
    Value call = Value::EmptyObject();
    call.Set("id", Value::String(event.tool_call().call().id()));
    call.Set("name", Value::String(event.tool_call().call().name()));
    calls_.Append(std::move(call));
  }
}

Value RequestEvidence::Finish(const v1::Terminal& terminal, const std::string& bundle_sha256,
                              int64_t now_unix_us) {
  Value record = record_;
  Value timings = Value::EmptyObject();
  timings.Set("first_output_ms", Millis(first_output_us_));
  timings.Set("tool_call_complete_ms", Millis(first_tool_call_us_));
  timings.Set("finished_ms", Millis(now_unix_us - received_us_));
  timings.Set("worker_first_token_ms", Millis(terminal.timings().first_token_us()));
  timings.Set("worker_prefill_ms", Millis(terminal.timings().prefill_us()));
  timings.Set("worker_decode_ms", Millis(terminal.timings().decode_us()));
  record.Set("timings", std::move(timings));
  record.Set("tool_calls", calls_);
  record.Set("worker_prompt_tokens", Value::Int(terminal.usage().prompt_tokens()));
  record.Set("worker_prompt_token_ids_sha256", Value::String(terminal.usage().prompt_ids_sha256()));
  record.Set("bundle_sha256", Value::String(terminal.bundle().identity_sha256().empty()
                                                ? bundle_sha256
                                                : terminal.bundle().identity_sha256()));
  absl::Status status = openai::TerminalStatus(terminal);
  record.Set("outcome", Value::String(status.ok()
                                          ? openai::FinishReasonName(terminal.finish_reason())
                                          : http::ErrorCodeOf(status)));
  return record;
}

}  // namespace gantry::router
