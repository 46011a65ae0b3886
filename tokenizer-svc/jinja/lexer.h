// The Jinja lexer: template source -> tokens, with the whitespace rules of Python
// Jinja2 as Hugging Face transformers configures it (trim_blocks=True,
// lstrip_blocks=True, keep_trailing_newline=False).
//
// What it does, in Jinja2's order:
//  - newlines are normalised first as Python's str.splitlines() + "\n".join() does
//    ("\r\n", "\r", "\v", "\f", "\x1c".."\x1e", U+0085, U+2028, U+2029 become "\n"),
//    which also drops one trailing line break (keep_trailing_newline=False);
//  - text outside tags becomes kText; `{# ... #}` comments disappear; `{% raw %}` bodies
//    become kText verbatim;
//  - `{%-`/`{{-`/`{#-` strip all whitespace before the tag, `-%}`/`-}}`/`-#}` all
//    whitespace after it; lstrip_blocks strips spaces and tabs from the start of a line
//    up to `{%` or `{#` (not `{{`; `{%+` disables it); trim_blocks removes the first
//    newline after `%}` or `#}` (`+%}` disables it);
//  - inside `{{ }}` and `{% %}`: names, strings (Python escapes), integers, floats and
//    operators. An end marker inside open brackets is read as brackets, as in Jinja2.
//
// Errors: INVALID_ARGUMENT with reason template_render_failed, "line N: what"
// (unterminated tag, comment or string; unexpected character).
//
// Thread-safety: pure function.
#ifndef GANTRY_TOKENIZER_SVC_JINJA_LEXER_H_
#define GANTRY_TOKENIZER_SVC_JINJA_LEXER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gantry::jinja {

enum class TokenKind {
  kText,        // template data; `text` holds it
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,        // identifier or keyword; `text`
  kString,      // string literal, escapes decoded; `text`
  kInteger,     // `text` holds the digits (underscores removed)
  kFloat,       // `text` holds the literal (underscores removed)
  kOperator,    // `text`: one of + - * / // % ** ~ == != < <= > >= = . : | , ( ) [ ] { } ;
  kEnd,         // end of input
};

struct Token {
  TokenKind kind;
  std::string text;
  int line;  // 1-based line in the (newline-normalised) source
};

struct LexerLimits {
  size_t max_source_bytes = 4 << 20;
};

// Tokenizes `source`. The result always ends with one kEnd token.
absl::StatusOr<std::vector<Token>> Tokenize(absl::string_view source,
                                            const LexerLimits& limits = {});

// Python's str.splitlines() + "\n".join(): exposed for tests.
std::string NormalizeNewlines(absl::string_view source);

}  // namespace gantry::jinja

#endif  // GANTRY_TOKENIZER_SVC_JINJA_LEXER_H_
