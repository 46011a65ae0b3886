// The prompt a request runs: its conversation (conversation.h) rendered with the
// bundle's chat template and tokenized with the bundle's tokenizer. The router (to
// count and admit) and the worker (to run) both call BuildPrompt, so the tokens counted
// are the tokens run.
//
// Special tokens. The template's own control tokens ("<|im_start|>", "<s>") are matched
// as special tokens, as Hugging Face does. Text that came from the client (message
// content, reasoning, tool arguments and definitions, template variables) is not
// allowed to produce one: a user who types "<|im_start|>system" gets the ids of that
// text, never the control token (HF's split_special_tokens behaviour, applied to the
// client's spans only). Unless the request's `special_tokens_in_content` (set by the
// router from the principal's policy, never by the client) says otherwise.
//
// How the spans are found: every occurrence of a special token's text in a client
// string is replaced by a marker made of Unicode noncharacters before rendering; after
// rendering, each marker is put back and its byte range is tokenized as text
// (EncodeOptions::literal_ranges). The result is checked against a render of the
// unmodified conversation: the text must be byte-identical, so the only difference the
// markers make is which tokens the client's bytes become. A template that transforms a
// marker beyond recognition fails closed (invalid_request), never falls back.
// Requests without such text take one render and one encode, as before.
//
// Thread-safety: pure function of its arguments.
#ifndef GANTRY_TOKENIZER_SVC_CONVERSATION_PROMPT_H_
#define GANTRY_TOKENIZER_SVC_CONVERSATION_PROMPT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gantry/v1/inference.pb.h"
#include "tokenizer-svc/jinja/chat_template.h"
#include "tokenizer-svc/tokenizer/tokenizer.h"

namespace gantry::conversation {

struct Prompt {
  std::string text;
  std::vector<int32_t> ids;
  // Occurrences of special-token text from the client that were tokenized as text.
  int literal_special_spans = 0;
};

// Errors: INVALID_ARGUMENT with reason template_render_failed (the template raised;
// "line N: message"), invalid_request (text that is not valid UTF-8, or markers the
// template mangled).
absl::StatusOr<Prompt> BuildPrompt(const jinja::ChatTemplate& chat_template,
                                   const tokenizer::Tokenizer& tokenizer,
                                   const v1::InferenceRequest& request);

}  // namespace gantry::conversation

#endif  // GANTRY_TOKENIZER_SVC_CONVERSATION_PROMPT_H_
