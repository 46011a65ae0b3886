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
// Tool definitions. An agent sends the same tools on every turn, and converting them
// (parsing each schema, building the template's values, their `tojson` texts) was most
// of a render. With a ToolsCache, BuildPrompt keeps that conversion from one request to
// the next; the long text sections the tools render into are kept by the tokenizer's
// own section cache (tokenizer.h). Both are exact: a prompt built with the cache is
// byte- and id-identical to one built without (prompt_test checks, hits included).
//
// Thread-safety: BuildPrompt is a pure function of its arguments (a ToolsCache is
// internally synchronized and changes no result).
#ifndef GANTRY_TOKENIZER_SVC_CONVERSATION_PROMPT_H_
#define GANTRY_TOKENIZER_SVC_CONVERSATION_PROMPT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gantry/v1/inference.pb.h"
#include "tokenizer-svc/jinja/chat_template.h"
#include "tokenizer-svc/tokenizer/lru_cache.h"
#include "tokenizer-svc/tokenizer/tokenizer.h"

namespace gantry::conversation {

struct Prompt {
  std::string text;
  std::vector<int32_t> ids;
  // Occurrences of special-token text from the client that were tokenized as text.
  int literal_special_spans = 0;
};

// The tool definitions of recent requests, converted for the template: a bounded LRU
// (entries and bytes). An entry is keyed by the exact bytes of every field the
// conversion reads (name, description, parameters_json of each tool, in order) and by
// the template and tokenizer it was made with (their addresses: one cache may serve
// several pairs, never mixing them), and holds what a fresh conversion computes: the
// template's `tools` value, the `tojson` text of the list, of each tool and of each
// tool's function (jinja::ToJsonMemo), and whether any of their strings holds
// special-token text or a marker noncharacter. Such tools (where markers would be
// needed) take the uncached path, as does everything when no cache is given.
//
// Thread-safety: internally synchronized.
class ToolsCache {
 public:
  struct Entry;
  static constexpr size_t kDefaultEntries = 256;
  static constexpr size_t kDefaultBytes = 32u << 20;
  explicit ToolsCache(size_t max_entries = kDefaultEntries, size_t max_bytes = kDefaultBytes);
  ~ToolsCache();

  // The entry for `tools` as `chat_template` and `tokenizer` see them (made and kept
  // when absent).
  std::shared_ptr<const Entry> Get(const jinja::ChatTemplate& chat_template,
                                   const tokenizer::Tokenizer& tokenizer,
                                   const google::protobuf::RepeatedPtrField<v1::ToolDefinition>& tools);

  uint64_t hits() const { return lru_.stats().hits; }
  uint64_t misses() const { return lru_.stats().misses; }
  size_t size() const { return lru_.stats().entries; }

 private:
  tokenizer::LruCache<Entry> lru_;
};

// Errors: INVALID_ARGUMENT with reason template_render_failed (the template raised;
// "line N: message"), invalid_request (text that is not valid UTF-8, or markers the
// template mangled); OUT_OF_RANGE when the prompt has more than `max_ids` tokens
// (0: no limit; tokenization stops there, EncodeOptions::max_ids). `tools_cache` may be
// null (no caching).
absl::StatusOr<Prompt> BuildPrompt(const jinja::ChatTemplate& chat_template,
                                   const tokenizer::Tokenizer& tokenizer,
                                   const v1::InferenceRequest& request,
                                   ToolsCache* tools_cache = nullptr, size_t max_ids = 0);

}  // namespace gantry::conversation

#endif  // GANTRY_TOKENIZER_SVC_CONVERSATION_PROMPT_H_
