// Fuzz target: the Jinja lexer, parser and runtime (chat templates come from model
// bundles, i.e. from outside). The input is a template; it is parsed and rendered with
// a small fixed conversation under tight limits.
// Invariant: never a crash, a hang or unbounded memory; every failure is a
// template_render_failed status with a "line N: " message.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/json.h"
#include "common/status.h"
#include "tokenizer-svc/jinja/chat_template.h"

namespace {

const char kConversation[] = R"({
  "messages": [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi \u00e9 <tool_response>x</tool_response>"},
    {"role": "assistant", "content": "", "reasoning_content": "think",
     "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"a": 1.0, "b": [1, null]}}}]},
    {"role": "tool", "content": "{\"ok\": true}"},
    {"role": "assistant", "content": null}
  ],
  "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
  "add_generation_prompt": true,
  "enable_thinking": false
})";

void Check(const absl::Status& status) {
  if (status.ok()) return;
  if (gantry::ReasonOf(status) != "template_render_failed" ||
      std::string(status.message()).rfind("line ", 0) != 0) {
    std::abort();  // an error outside the contract
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gantry;
  static const json::Value* conversation = [] {
    auto v = json::Parse(kConversation);
    if (!v.ok()) std::abort();  // a bug in this file
    return new json::Value(*std::move(v));
  }();
  json::Value specials = json::Value::EmptyObject();
  specials.Set("bos_token", json::Value::String("<s>"));
  specials.Set("eos_token", json::Value::String("</s>"));
  absl::StatusOr<jinja::ChatTemplate> tpl = jinja::ChatTemplate::FromSource(
      absl::string_view(reinterpret_cast<const char*>(data), size), specials);
  if (!tpl.ok()) {
    Check(tpl.status());
    return 0;
  }
  jinja::RenderOptions options;
  options.max_steps = 200'000;
  options.max_output_bytes = 1 << 20;
  options.max_work_bytes = 16 << 20;
  options.max_string_bytes = 1 << 20;
  options.max_list_items = 1 << 16;
  options.max_call_depth = 32;
  options.max_range = 10'000;
  options.now_for_test = 0;
  absl::StatusOr<std::string> out = tpl->Render(*conversation, options);
  if (!out.ok()) Check(out.status());
  return 0;
}
