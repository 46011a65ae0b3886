// The syntax tree the parser builds and the interpreter walks.
//
// Ownership: each node owns its children (unique_ptr); a Template owns the root. Depth
// is bounded by the parser (ParserLimits), so recursive walks and destruction are bounded.
//
// Thread-safety: immutable after parsing; const use from several threads is safe.
#ifndef GANTRY_TOKENIZER_SVC_JINJA_AST_H_
#define GANTRY_TOKENIZER_SVC_JINJA_AST_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer-svc/jinja/value.h"

namespace gantry::jinja::ast {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,     // `literal`
    kName,        // `name`
    kList,        // args: elements
    kTuple,       // args: elements
    kDict,        // args: key0, value0, key1, value1, ...
    kGetAttr,     // args[0].name
    kGetItem,     // args[0][args[1]]
    kSlice,       // args[0][args[1]:args[2]:args[3]], absent parts null
    kCall,        // args[0](args[1..], kwargs)
    kFilter,      // args[0] | name(args[1..], kwargs); args[0] null: the block's body
    kTest,        // args[0] is [not] name(args[1..], kwargs)
    kNot,         // not args[0]
    kNeg,         // -args[0]
    kPos,         // +args[0]
    kBinary,      // args[0] `name` args[1]; name in + - * / // % ** ~
    kCompare,     // args[0] ops[0] args[1] ops[1] args[2] ... (chained)
    kAnd,         // args[0] and args[1]
    kOr,          // args[0] or args[1]
    kCond,        // args[1] if args[0] else args[2] (args[2] null: undefined)
    kBlockInput,  // the rendered body of a {% filter %} or block {% set %}
  };
  Kind kind;
  int line = 0;
  int depth = 1;  // height of this subtree
  Value literal;
  std::string name;
  bool negated = false;  // kTest: `is not`
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // kCompare: == != < <= > >= in notin
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind {
    kText,         // text
    kOutput,       // {{ expr }}
    kIf,           // if expr: body else else_body (elif nests a kIf in else_body)
    kFor,          // for target in expr [if cond]: body, else_body; recursive unsupported
    kSet,          // set target = expr
    kSetBlock,     // set target [| filter]: body; filter is a kFilter chain on kBlockInput
    kMacro,        // macro name(params = defaults): body
    kFilterBlock,  // filter filter: body
    kBreak,
    kContinue,
    kWith,         // with targets = values: body
    kScope,        // {% generation %} and plain bodies: body, same frame
  };
  Kind kind;
  int line = 0;
  std::string text;                 // kText
  std::string name;                 // kMacro
  ExprPtr expr;                     // condition, value, iterable, filter chain
  ExprPtr target;                   // kSet, kFor: a name, a tuple of names or ns.attr
  ExprPtr cond;                     // kFor: the `if` filter
  std::vector<std::string> params;  // kMacro
  std::vector<ExprPtr> defaults;    // kMacro: aligned with params, null when none
  std::vector<ExprPtr> targets;     // kWith
  std::vector<ExprPtr> values;      // kWith
  Body body;
  Body else_body;
  bool uses_varargs = false;  // kMacro: the body names `varargs` / `kwargs`
  bool uses_kwargs = false;
};

}  // namespace gantry::jinja::ast

#endif  // GANTRY_TOKENIZER_SVC_JINJA_AST_H_
