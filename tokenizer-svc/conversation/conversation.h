// The conversation object a chat template receives for a request: what Hugging Face's
// apply_chat_template(messages=..., tools=..., add_generation_prompt=True, **kwargs)
// passes. The router (to count the prompt) and the worker (to run it) both use this one
// function, so that the count admitted is the prompt served.
//
// Normalisations, each because real clients send it and publisher templates reject it:
//   - content null (Qwen Code's assistant tool-call messages) becomes "" (Qwen3's
//     template fails on null);
//   - tool-call arguments are passed as the parsed JSON object (HF passes a dict);
//     arguments that are not JSON are passed as the text sent.
// A tool without `parameters` is passed without that key, as the client sent it.
// Template kwargs that would override what the request carries or the bundle supplies
// are ignored: messages, tools, add_generation_prompt, custom_tools, builtin_tools,
// documents, kwargs, reasoning_effort and the special-token variables (bos_token, ...).
// Otherwise a client could offer tools the policy never saw (Llama 3.1 reads
// custom_tools) or undo a clamped reasoning effort.
//
// Thread-safety: pure function.
#ifndef GANTRY_TOKENIZER_SVC_CONVERSATION_CONVERSATION_H_
#define GANTRY_TOKENIZER_SVC_CONVERSATION_CONVERSATION_H_

#include "common/json.h"
#include "gantry/v1/inference.pb.h"

namespace gantry::conversation {

json::Value TemplateConversation(const v1::InferenceRequest& request);

// The template's `tools` list for `tools` (what TemplateConversation puts under "tools"
// when there are any): a function of each definition's name, description and
// parameters_json only (prompt.h's ToolsCache keys its entries by exactly these).
json::Value TemplateTools(const google::protobuf::RepeatedPtrField<v1::ToolDefinition>& tools);

// TemplateConversation without its "tools" member, for a caller that passes the
// template its tools already converted (jinja::ChatTemplate::RenderWithTools).
json::Value TemplateConversationWithoutTools(const v1::InferenceRequest& request);

}  // namespace gantry::conversation

#endif  // GANTRY_TOKENIZER_SVC_CONVERSATION_CONVERSATION_H_
