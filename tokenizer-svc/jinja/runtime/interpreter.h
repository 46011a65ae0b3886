// The Jinja runtime: a parsed template and its renderer.
//
// Semantics are Python Jinja2's under Hugging Face transformers' settings: an
// ImmutableSandboxedEnvironment (lists and dicts cannot be modified; namespace() is the
// one mutable object), default Undefined (prints as "", iterates as empty, fails when
// used in arithmetic, called, or looked into), loop controls, and HF's globals
// raise_exception(msg) and strftime_now(fmt). Each for-loop turn and each macro call has
// its own scope; {% set %} writes to the innermost scope, as in Jinja2.
//
// Every render is bounded (RenderOptions): steps, output and text produced, string and
// list sizes, value nesting, macro call depth, range() length. Exceeding a bound is an
// error like any template error: INVALID_ARGUMENT, reason template_render_failed,
// "line N: what". raise_exception("msg") gives "line N: msg".
//
// Thread-safety: a Template is immutable; Render() may run concurrently on several
// threads (each render has its own state).
#ifndef GANTRY_TOKENIZER_SVC_JINJA_RUNTIME_INTERPRETER_H_
#define GANTRY_TOKENIZER_SVC_JINJA_RUNTIME_INTERPRETER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tokenizer-svc/jinja/ast.h"
#include "tokenizer-svc/jinja/lexer.h"
#include "tokenizer-svc/jinja/parser.h"
#include "tokenizer-svc/jinja/value.h"

namespace gantry::jinja {

// Results of `x | tojson` (no arguments) computed ahead, by the identity() of the
// container x: each text must be json::Dump(*ToJson(x)), what the filter computes, so a
// memo saves the work and never changes the output (the render is charged the same
// bytes). The caller keeps every such x alive for the render (identities are the
// addresses of their storage). Used for the tool definitions a caller keeps converted
// from one render to the next (tokenizer-svc/conversation/prompt.h).
using ToJsonMemo = absl::flat_hash_map<const void*, std::string>;

struct RenderOptions {
  int64_t max_steps = 20'000'000;
  size_t max_output_bytes = 32u << 20;
  uint64_t max_work_bytes = 1ull << 30;
  size_t max_string_bytes = 32u << 20;
  size_t max_list_items = 1u << 20;
  int max_value_depth = 300;
  int max_call_depth = 64;
  int max_nesting = 1000;  // the interpreter's recursion: blocks, expressions, calls
  int64_t max_range = 100'000;  // Jinja2's sandbox MAX_RANGE
  // strftime_now() reads this instead of the clock when >= 0 (seconds since the epoch,
  // formatted in local time); for tests.
  int64_t now_for_test = -1;
  // Not owned; may be null. See ToJsonMemo.
  const ToJsonMemo* tojson_memo = nullptr;
};

class Template {
 public:
  // Lexes and parses `source`. Errors: INVALID_ARGUMENT (template_render_failed) with the
  // line of the first syntax error.
  static absl::StatusOr<std::shared_ptr<const Template>> Parse(absl::string_view source,
                                                               const LexerLimits& lexer = {},
                                                               const ParserLimits& parser = {});

  // Renders with `context` as the template's variables (HF passes messages, tools,
  // add_generation_prompt, special tokens and extra kwargs this way).
  absl::StatusOr<std::string> Render(const DictData& context,
                                     const RenderOptions& options = {}) const;

  explicit Template(ast::Body body) : body_(std::move(body)) {}

 private:
  ast::Body body_;
};

}  // namespace gantry::jinja

#endif  // GANTRY_TOKENIZER_SVC_JINJA_RUNTIME_INTERPRETER_H_
