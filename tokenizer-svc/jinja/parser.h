// The Jinja parser: tokens -> syntax tree (ast.h), with Jinja2's grammar and operator
// precedence (lowest first): inline if/else, or, and, not, comparisons (== != < <= > >=
// in, not in), + -, ~, * / // %, **, unary - +, then filters `|f(...)`, tests
// `is [not] t(...)`, calls, `.attr` and `[index or slice]`.
//
// Statements: if/elif/else, for (tuple targets, `if` filter, else, loop.*), set (plain,
// tuple, ns.attr, block set with filters), macro (defaults), filter blocks, break,
// continue, with, generation (renders its body), raw (in the lexer). Anything else
// ({% include %}, {% extends %}, {% call %}, recursive loops, ...) is an error that
// names the tag.
//
// Errors: INVALID_ARGUMENT, reason template_render_failed, "line N: what".
//
// Thread-safety: pure function.
#ifndef GANTRY_TOKENIZER_SVC_JINJA_PARSER_H_
#define GANTRY_TOKENIZER_SVC_JINJA_PARSER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "tokenizer-svc/jinja/ast.h"
#include "tokenizer-svc/jinja/lexer.h"

namespace gantry::jinja {

struct ParserLimits {
  int max_expr_depth = 128;   // height of one expression tree
  int max_block_depth = 256;  // nesting of block statements and elif chains
  size_t max_nodes = 1 << 20;
};

absl::StatusOr<ast::Body> Parse(const std::vector<Token>& tokens, const ParserLimits& limits = {});

}  // namespace gantry::jinja

#endif  // GANTRY_TOKENIZER_SVC_JINJA_PARSER_H_
