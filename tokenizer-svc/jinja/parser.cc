#include "tokenizer-svc/jinja/parser.h"

#include <cerrno>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "tokenizer-svc/jinja/error.h"

namespace gantry::jinja {
namespace {

using ast::Body;
using ast::Expr;
using ast::ExprPtr;
using ast::Stmt;
using ast::StmtPtr;
using EK = ast::Expr::Kind;
using SK = ast::Stmt::Kind;

#define PARSE_OR_RETURN(lhs, expr) GANTRY_ASSIGN_OR_RETURN(lhs, expr)

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, const ParserLimits& limits)
      : t_(tokens), limits_(limits) {}

  absl::StatusOr<Body> Run() {
    std::string end;
    PARSE_OR_RETURN(Body body, ParseBody({}, &end));
    return body;
  }

 private:
  // Guards the recursion of the expression parser (nested parentheses, `not not`, ...).
  struct DepthGuard {
    explicit DepthGuard(int* d) : d_(d) { ++*d_; }
    ~DepthGuard() { --*d_; }
    int* d_;
  };

  const Token& Cur() const { return t_[p_]; }
  const Token& Peek() const { return t_[p_ + 1 < t_.size() ? p_ + 1 : p_]; }
  void Next() {
    if (p_ + 1 < t_.size()) ++p_;
  }
  bool IsOp(absl::string_view op) const {
    return Cur().kind == TokenKind::kOperator && Cur().text == op;
  }
  bool IsName(absl::string_view name) const {
    return Cur().kind == TokenKind::kName && Cur().text == name;
  }
  bool SkipOp(absl::string_view op) {
    if (!IsOp(op)) return false;
    Next();
    return true;
  }
  bool SkipName(absl::string_view name) {
    if (!IsName(name)) return false;
    Next();
    return true;
  }

  std::string Describe(const Token& t) const {
    switch (t.kind) {
      case TokenKind::kEnd: return "end of template";
      case TokenKind::kVarEnd: return "'}}'";
      case TokenKind::kBlockEnd: return "'%}'";
      case TokenKind::kVarBegin: return "'{{'";
      case TokenKind::kBlockBegin: return "'{%'";
      case TokenKind::kText: return "template data";
      case TokenKind::kString: return "string";
      default: return absl::StrCat("'", t.text, "'");
    }
  }

  absl::Status Fail(absl::string_view what) const { return TemplateError(Cur().line, what); }
  absl::Status Unexpected(absl::string_view expected) const {
    return Fail(absl::StrCat("expected ", expected, ", got ", Describe(Cur())));
  }
  absl::Status ExpectOp(absl::string_view op) {
    if (!SkipOp(op)) return Unexpected(absl::StrCat("'", op, "'"));
    return absl::OkStatus();
  }
  absl::Status ExpectBlockEnd() {
    if (Cur().kind != TokenKind::kBlockEnd) return Unexpected("end of statement block");
    Next();
    return absl::OkStatus();
  }

  ExprPtr New(EK kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  // Computes the height of `e` and enforces the size limits.
  absl::StatusOr<ExprPtr> Finish(ExprPtr e) {
    int depth = 0;
    for (const auto& a : e->args) {
      if (a) depth = std::max(depth, a->depth);
    }
    for (const auto& kw : e->kwargs) depth = std::max(depth, kw.second->depth);
    e->depth = depth + 1;
    if (e->depth > limits_.max_expr_depth) return TemplateError(e->line, "expression is nested too deeply");
    if (++nodes_ > limits_.max_nodes) return TemplateError(e->line, "template is too large");
    return e;
  }

  // ---- statements ----

  absl::StatusOr<Body> ParseBody(const std::vector<std::string>& end_tags, std::string* found) {
    if (++block_depth_ > limits_.max_block_depth) return Fail("blocks are nested too deeply");
    Body body;
    while (true) {
      const Token& tok = Cur();
      if (tok.kind == TokenKind::kEnd) {
        if (!end_tags.empty()) {
          return Fail(absl::StrCat("unexpected end of template, expected '",
                                   absl::StrJoin(end_tags, "' or '"), "'"));
        }
        break;
      }
      if (tok.kind == TokenKind::kText) {
        auto s = std::make_unique<Stmt>();
        s->kind = SK::kText;
        s->line = tok.line;
        s->text = tok.text;
        body.push_back(std::move(s));
        Next();
      } else if (tok.kind == TokenKind::kVarBegin) {
        Next();
        auto s = std::make_unique<Stmt>();
        s->kind = SK::kOutput;
        s->line = tok.line;
        PARSE_OR_RETURN(s->expr, ParseTuple(true));
        if (Cur().kind != TokenKind::kVarEnd) return Unexpected("end of print statement");
        Next();
        body.push_back(std::move(s));
      } else if (tok.kind == TokenKind::kBlockBegin) {
        Next();
        if (Cur().kind != TokenKind::kName) return Unexpected("a statement name");
        for (const std::string& end : end_tags) {
          if (Cur().text == end) {
            *found = end;
            Next();
            --block_depth_;
            return body;
          }
        }
        PARSE_OR_RETURN(StmtPtr s, ParseStatement());
        body.push_back(std::move(s));
      } else {
        return Unexpected("template data or a tag");
      }
    }
    --block_depth_;
    return body;
  }

  absl::StatusOr<StmtPtr> ParseStatement() {
    const Token& tok = Cur();
    auto s = std::make_unique<Stmt>();
    s->line = tok.line;
    std::string name = tok.text;
    Next();
    std::string end;
    if (name == "if") {
      s->kind = SK::kIf;
      PARSE_OR_RETURN(s->expr, ParseExpression(true));
      GANTRY_RETURN_IF_ERROR(ExpectBlockEnd());
      PARSE_OR_RETURN(s->body, ParseBody({"elif", "else", "endif"}, &end));
      if (end == "elif") {
        --p_;  // re-read `elif` as a nested `if`
        PARSE_OR_RETURN(StmtPtr nested, ParseStatement());
        nested->kind = SK::kIf;
        s->else_body.push_back(std::move(nested));
        return s;
      }
      if (end == "else") {
        GANTRY_RETURN_IF_ERROR(ExpectBlockEnd());
        PARSE_OR_RETURN(s->else_body, ParseBody({"endif"}, &end));
      }
      GANTRY_RETURN_IF_ERROR(ExpectBlockEnd());
    } else if (name == "elif") {
      // Only reached through the re-read above: parse as `if`, closed by the outer endif.
      DepthGuard guard(&block_depth_);
      if (block_depth_ > limits_.max_block_depth) return Fail("too many elif branches");
      s->kind = SK::kIf;
      PARSE_OR_RETURN(s->expr, ParseExpression(true));
      GANTRY_RETURN_IF_ERROR(ExpectBlockEnd());
      PARSE_OR_RETURN(s->body, ParseBody({"elif", "else", "endif"}, &end));
      if (end == "elif") {
        --p_;
        PARSE_OR_RETURN(StmtPtr nested, ParseStatement());
        s->else_body.push_back(std::move(nested));
        return s;
      }
      if (end == "else") {
        GANTRY_RETURN_IF_ERROR(ExpectBlockEnd());
        PARSE_OR_RETURN(s->else_body, ParseBody({"endif"}, &end));
      }
      GANTRY_RETURN_IF_ERROR(ExpectBlockEnd());
    } else if (name == "for") {
      s->kind = SK::kFor;
      PARSE_OR_RETURN(s->target, ParseAssignTarget(false));
      if (!SkipName("in")) return Unexpected("'in'");
      PARSE_OR_RETURN(s->expr, ParseTuple(false));
      if (SkipName("if")) {
        PARSE_OR_RETURN(s->cond, ParseExpression(true));
      }
      if (IsName("recursive")) return Fail("recursive loops are not supported");
      GANTRY_RETURN_IF_ERROR(ExpectBlockEnd());
      ++loop_depth_;
      PARSE_OR_RETURN(s->body, ParseBody({"endfor", "else"}, &end));
      --loop_depth_;
      if (end == "else") {
        GANTRY_RETURN_IF_ERROR(ExpectBlockEnd());
        PARSE_OR_RETURN(s->else_body, ParseBody({"endfor"}, &end));
      }
      GANTRY_RETURN_IF_ERROR(ExpectBlockEnd());
    } else if (name == "set") {
      PARSE_OR_RETURN(s->target, ParseAssignTarget(true));
      if (SkipOp("=")) {
        s->kind = SK::kSet;
        PARSE_OR_RETURN(s->expr, ParseTuple(true));
        GANTRY_RETURN_IF_ERROR(ExpectBlockEnd());
      } else {
        s->kind = SK::kSetBlock;
        if (IsOp("|")) {
          PARSE_OR_RETURN(s->expr, ParseFilters(New(EK::kBlockInput, s->line), false));
        }
        GANTRY_RETURN_IF_ERROR(ExpectBlockEnd());
        PARSE_OR_RETURN(s->body, ParseBody({"endset"}, &end));
        GANTRY_RETURN_IF_ERROR(ExpectBlockEnd());
      }
    } else if (name == "macro") {
      s->kind = SK::kMacro;
      if (Cur().kind != TokenKind::kName) return Unexpected("a macro name");
      s->name = Cur().text;
      Next();
      GANTRY_RETURN_IF_ERROR(ExpectOp("("));
      while (!IsOp(")")) {
        if (!s->params.empty()) GANTRY_RETURN_IF_ERROR(ExpectOp(","));
        if (IsOp(")")) break;
        if (Cur().kind != TokenKind::kName) return Unexpected("a parameter name");
        s->params.push_back(Cur().text);
        Next();
        ExprPtr def;
        if (SkipOp("=")) {
          PARSE_OR_RETURN(def, ParseExpression(true));
        }
        s->defaults.push_back(std::move(def));
      }
      Next();
      GANTRY_RETURN_IF_ERROR(ExpectBlockEnd());
      bool saved_varargs = saw_varargs_, saved_kwargs = saw_kwargs_;
      int saved_loops = loop_depth_;
      saw_varargs_ = saw_kwargs_ = false;
      loop_depth_ = 0;
      PARSE_OR_RETURN(s->body, ParseBody({"endmacro"}, &end));
      s->uses_varargs = saw_varargs_;
      s->uses_kwargs = saw_kwargs_;
      saw_varargs_ = saved_varargs;
      saw_kwargs_ = saved_kwargs;
      loop_depth_ = saved_loops;
      if (Cur().kind == TokenKind::kName) Next();  // `{% endmacro name %}`
      GANTRY_RETURN_IF_ERROR(ExpectBlockEnd());
    } else if (name == "filter") {
      s->kind = SK::kFilterBlock;
      PARSE_OR_RETURN(s->expr, ParseFilters(New(EK::kBlockInput, s->line), true));
      GANTRY_RETURN_IF_ERROR(ExpectBlockEnd());
      PARSE_OR_RETURN(s->body, ParseBody({"endfilter"}, &end));
      GANTRY_RETURN_IF_ERROR(ExpectBlockEnd());
    } else if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) return TemplateError(s->line, absl::StrCat("'", name, "' outside of a loop"));
      s->kind = name == "break" ? SK::kBreak : SK::kContinue;
      GANTRY_RETURN_IF_ERROR(ExpectBlockEnd());
    } else if (name == "with") {
      s->kind = SK::kWith;
      while (Cur().kind != TokenKind::kBlockEnd) {
        if (!s->targets.empty()) GANTRY_RETURN_IF_ERROR(ExpectOp(","));
        PARSE_OR_RETURN(ExprPtr target, ParseAssignTarget(false));
        GANTRY_RETURN_IF_ERROR(ExpectOp("="));
        PARSE_OR_RETURN(ExprPtr value, ParseExpression(true));
        s->targets.push_back(std::move(target));
        s->values.push_back(std::move(value));
      }
      Next();
      PARSE_OR_RETURN(s->body, ParseBody({"endwith"}, &end));
      GANTRY_RETURN_IF_ERROR(ExpectBlockEnd());
    } else if (name == "generation") {
      s->kind = SK::kScope;
      GANTRY_RETURN_IF_ERROR(ExpectBlockEnd());
      PARSE_OR_RETURN(s->body, ParseBody({"endgeneration"}, &end));
      GANTRY_RETURN_IF_ERROR(ExpectBlockEnd());
    } else {
      return TemplateError(s->line, absl::StrCat("encountered unknown or unsupported tag '", name, "'"));
    }
    return s;
  }

  // A name, `a, b` / `(a, b)` of names, or (with_namespace) `ns.attr`.
  absl::StatusOr<ExprPtr> ParseAssignTarget(bool with_namespace) {
    int line = Cur().line;
    if (with_namespace && Cur().kind == TokenKind::kName && Peek().kind == TokenKind::kOperator &&
        Peek().text == ".") {
      ExprPtr obj = New(EK::kName, line);
      obj->name = Cur().text;
      Next();
      Next();
      if (Cur().kind != TokenKind::kName) return Unexpected("an attribute name");
      ExprPtr e = New(EK::kGetAttr, line);
      e->name = Cur().text;
      Next();
      e->args.push_back(std::move(obj));
      return Finish(std::move(e));
    }
    bool parens = SkipOp("(");
    ExprPtr tuple = New(EK::kTuple, line);
    bool comma = false;
    while (true) {
      if (Cur().kind != TokenKind::kName) return Unexpected("a variable name");
      const std::string& n = Cur().text;
      if (n == "true" || n == "false" || n == "none" || n == "True" || n == "False" ||
          n == "None" || n == "loop") {
        if (n != "loop") return Fail(absl::StrCat("cannot assign to '", n, "'"));
      }
      ExprPtr name = New(EK::kName, Cur().line);
      name->name = n;
      Next();
      tuple->args.push_back(std::move(name));
      if (!SkipOp(",")) break;
      comma = true;
      if (parens ? IsOp(")") : (IsName("in") || IsOp("=") || Cur().kind == TokenKind::kBlockEnd)) break;
    }
    if (parens) GANTRY_RETURN_IF_ERROR(ExpectOp(")"));
    if (!comma && !parens) return std::move(tuple->args[0]);
    if (!comma && tuple->args.size() == 1) return std::move(tuple->args[0]);
    return Finish(std::move(tuple));
  }

  // ---- expressions ----

  bool IsTupleEnd() const {
    const Token& t = Cur();
    return t.kind == TokenKind::kVarEnd || t.kind == TokenKind::kBlockEnd || t.kind == TokenKind::kEnd ||
           (t.kind == TokenKind::kOperator && t.text == ")") ||
           (t.kind == TokenKind::kName && (t.text == "if" || t.text == "recursive"));
  }

  // Expressions separated by commas form a tuple.
  absl::StatusOr<ExprPtr> ParseTuple(bool with_condexpr) {
    int line = Cur().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty() && IsTupleEnd()) break;
      PARSE_OR_RETURN(ExprPtr e, ParseExpression(with_condexpr));
      items.push_back(std::move(e));
      if (!SkipOp(",")) break;
      is_tuple = true;
    }
    if (!is_tuple) return std::move(items[0]);
    ExprPtr t = New(EK::kTuple, line);
    t->args = std::move(items);
    return Finish(std::move(t));
  }

  absl::StatusOr<ExprPtr> ParseExpression(bool with_condexpr) {
    DepthGuard guard(&recursion_);
    if (recursion_ > limits_.max_expr_depth) return Fail("expression is nested too deeply");
    PARSE_OR_RETURN(ExprPtr e, ParseOr());
    if (!with_condexpr) return e;
    while (IsName("if")) {
      int line = Cur().line;
      Next();
      PARSE_OR_RETURN(ExprPtr cond, ParseOr());
      ExprPtr otherwise;
      if (SkipName("else")) {
        PARSE_OR_RETURN(otherwise, ParseExpression(true));
      }
      ExprPtr c = New(EK::kCond, line);
      c->args.push_back(std::move(cond));
      c->args.push_back(std::move(e));
      c->args.push_back(std::move(otherwise));
      PARSE_OR_RETURN(e, Finish(std::move(c)));
    }
    return e;
  }

  absl::StatusOr<ExprPtr> Binary(EK kind, std::string op, int line, ExprPtr a, ExprPtr b) {
    ExprPtr e = New(kind, line);
    e->name = std::move(op);
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return Finish(std::move(e));
  }

  absl::StatusOr<ExprPtr> ParseOr() {
    PARSE_OR_RETURN(ExprPtr left, ParseAnd());
    while (IsName("or")) {
      int line = Cur().line;
      Next();
      PARSE_OR_RETURN(ExprPtr right, ParseAnd());
      PARSE_OR_RETURN(left, Binary(EK::kOr, "or", line, std::move(left), std::move(right)));
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseAnd() {
    PARSE_OR_RETURN(ExprPtr left, ParseNot());
    while (IsName("and")) {
      int line = Cur().line;
      Next();
      PARSE_OR_RETURN(ExprPtr right, ParseNot());
      PARSE_OR_RETURN(left, Binary(EK::kAnd, "and", line, std::move(left), std::move(right)));
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseNot() {
    if (IsName("not")) {
      DepthGuard guard(&recursion_);
      if (recursion_ > limits_.max_expr_depth) return Fail("expression is nested too deeply");
      int line = Cur().line;
      Next();
      PARSE_OR_RETURN(ExprPtr operand, ParseNot());
      ExprPtr e = New(EK::kNot, line);
      e->args.push_back(std::move(operand));
      return Finish(std::move(e));
    }
    return ParseCompare();
  }

  absl::StatusOr<ExprPtr> ParseCompare() {
    int line = Cur().line;
    PARSE_OR_RETURN(ExprPtr first, ParseMath1());
    ExprPtr cmp = New(EK::kCompare, line);
    cmp->args.push_back(std::move(first));
    while (true) {
      std::string op;
      if (Cur().kind == TokenKind::kOperator &&
          (Cur().text == "==" || Cur().text == "!=" || Cur().text == "<" || Cur().text == "<=" ||
           Cur().text == ">" || Cur().text == ">=")) {
        op = Cur().text;
        Next();
      } else if (IsName("in")) {
        op = "in";
        Next();
      } else if (IsName("not") && Peek().kind == TokenKind::kName && Peek().text == "in") {
        op = "notin";
        Next();
        Next();
      } else {
        break;
      }
      PARSE_OR_RETURN(ExprPtr operand, ParseMath1());
      cmp->ops.push_back(op);
      cmp->args.push_back(std::move(operand));
    }
    if (cmp->ops.empty()) return std::move(cmp->args[0]);
    return Finish(std::move(cmp));
  }

  absl::StatusOr<ExprPtr> ParseMath1() {
    PARSE_OR_RETURN(ExprPtr left, ParseConcat());
    while (IsOp("+") || IsOp("-")) {
      std::string op = Cur().text;
      int line = Cur().line;
      Next();
      PARSE_OR_RETURN(ExprPtr right, ParseConcat());
      PARSE_OR_RETURN(left, Binary(EK::kBinary, op, line, std::move(left), std::move(right)));
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseConcat() {
    PARSE_OR_RETURN(ExprPtr left, ParseMath2());
    while (IsOp("~")) {
      int line = Cur().line;
      Next();
      PARSE_OR_RETURN(ExprPtr right, ParseMath2());
      PARSE_OR_RETURN(left, Binary(EK::kBinary, "~", line, std::move(left), std::move(right)));
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseMath2() {
    PARSE_OR_RETURN(ExprPtr left, ParsePow());
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      std::string op = Cur().text;
      int line = Cur().line;
      Next();
      PARSE_OR_RETURN(ExprPtr right, ParsePow());
      PARSE_OR_RETURN(left, Binary(EK::kBinary, op, line, std::move(left), std::move(right)));
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParsePow() {
    PARSE_OR_RETURN(ExprPtr left, ParseUnary(true));
    while (IsOp("**")) {
      int line = Cur().line;
      Next();
      PARSE_OR_RETURN(ExprPtr right, ParseUnary(true));
      PARSE_OR_RETURN(left, Binary(EK::kBinary, "**", line, std::move(left), std::move(right)));
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseUnary(bool with_filter) {
    DepthGuard guard(&recursion_);
    if (recursion_ > limits_.max_expr_depth) return Fail("expression is nested too deeply");
    int line = Cur().line;
    ExprPtr node;
    if (IsOp("-") || IsOp("+")) {
      EK kind = IsOp("-") ? EK::kNeg : EK::kPos;
      Next();
      PARSE_OR_RETURN(ExprPtr operand, ParseUnary(false));
      node = New(kind, line);
      node->args.push_back(std::move(operand));
      PARSE_OR_RETURN(node, Finish(std::move(node)));
    } else {
      PARSE_OR_RETURN(node, ParsePrimary());
    }
    PARSE_OR_RETURN(node, ParsePostfix(std::move(node)));
    if (with_filter) {
      PARSE_OR_RETURN(node, ParseFilterExpr(std::move(node)));
    }
    return node;
  }

  absl::StatusOr<ExprPtr> ParsePrimary() {
    const Token& tok = Cur();
    int line = tok.line;
    switch (tok.kind) {
      case TokenKind::kName: {
        ExprPtr e = New(EK::kLiteral, line);
        const std::string& n = tok.text;
        if (n == "true" || n == "True") {
          e->literal = Value::Bool(true);
        } else if (n == "false" || n == "False") {
          e->literal = Value::Bool(false);
        } else if (n == "none" || n == "None") {
          e->literal = Value::None();
        } else {
          e->kind = EK::kName;
          e->name = n;
          if (n == "varargs") saw_varargs_ = true;
          if (n == "kwargs") saw_kwargs_ = true;
        }
        Next();
        return Finish(std::move(e));
      }
      case TokenKind::kString: {
        std::string s;
        while (Cur().kind == TokenKind::kString) {
          s += Cur().text;
          Next();
        }
        ExprPtr e = New(EK::kLiteral, line);
        e->literal = Value::String(std::move(s));
        return Finish(std::move(e));
      }
      case TokenKind::kInteger: {
        errno = 0;
        char* end = nullptr;
        long long v = std::strtoll(tok.text.c_str(), &end, 10);
        if (errno == ERANGE) return Fail("integer literal is too large");
        ExprPtr e = New(EK::kLiteral, line);
        e->literal = Value::Int(v);
        Next();
        return Finish(std::move(e));
      }
      case TokenKind::kFloat: {
        ExprPtr e = New(EK::kLiteral, line);
        e->literal = Value::Float(std::strtod(tok.text.c_str(), nullptr));
        Next();
        return Finish(std::move(e));
      }
      case TokenKind::kOperator:
        if (tok.text == "(") {
          Next();
          if (SkipOp(")")) {
            ExprPtr e = New(EK::kTuple, line);
            return Finish(std::move(e));
          }
          PARSE_OR_RETURN(ExprPtr e, ParseTuple(true));
          GANTRY_RETURN_IF_ERROR(ExpectOp(")"));
          return e;
        }
        if (tok.text == "[") {
          Next();
          ExprPtr e = New(EK::kList, line);
          while (!IsOp("]")) {
            if (!e->args.empty()) GANTRY_RETURN_IF_ERROR(ExpectOp(","));
            if (IsOp("]")) break;
            PARSE_OR_RETURN(ExprPtr item, ParseExpression(true));
            e->args.push_back(std::move(item));
          }
          Next();
          return Finish(std::move(e));
        }
        if (tok.text == "{") {
          Next();
          ExprPtr e = New(EK::kDict, line);
          while (!IsOp("}")) {
            if (!e->args.empty()) GANTRY_RETURN_IF_ERROR(ExpectOp(","));
            if (IsOp("}")) break;
            PARSE_OR_RETURN(ExprPtr key, ParseExpression(true));
            GANTRY_RETURN_IF_ERROR(ExpectOp(":"));
            PARSE_OR_RETURN(ExprPtr value, ParseExpression(true));
            e->args.push_back(std::move(key));
            e->args.push_back(std::move(value));
          }
          Next();
          return Finish(std::move(e));
        }
        break;
      default:
        break;
    }
    return Unexpected("an expression");
  }

  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr node) {
    while (true) {
      int line = Cur().line;
      if (IsOp(".")) {
        Next();
        if (Cur().kind == TokenKind::kName) {
          ExprPtr e = New(EK::kGetAttr, line);
          e->name = Cur().text;
          e->args.push_back(std::move(node));
          Next();
          PARSE_OR_RETURN(node, Finish(std::move(e)));
        } else if (Cur().kind == TokenKind::kInteger) {
          ExprPtr index = New(EK::kLiteral, line);
          index->literal = Value::Int(std::strtoll(Cur().text.c_str(), nullptr, 10));
          Next();
          PARSE_OR_RETURN(index, Finish(std::move(index)));
          ExprPtr e = New(EK::kGetItem, line);
          e->args.push_back(std::move(node));
          e->args.push_back(std::move(index));
          PARSE_OR_RETURN(node, Finish(std::move(e)));
        } else {
          return Unexpected("an attribute name");
        }
      } else if (IsOp("[")) {
        Next();
        PARSE_OR_RETURN(node, ParseSubscript(std::move(node), line));
      } else if (IsOp("(")) {
        PARSE_OR_RETURN(node, ParseCall(std::move(node)));
      } else {
        return node;
      }
    }
  }

  absl::StatusOr<ExprPtr> ParseSubscript(ExprPtr node, int line) {
    ExprPtr parts[3];
    if (!IsOp(":")) {
      PARSE_OR_RETURN(parts[0], ParseExpression(true));
      if (SkipOp("]")) {
        ExprPtr e = New(EK::kGetItem, line);
        e->args.push_back(std::move(node));
        e->args.push_back(std::move(parts[0]));
        return Finish(std::move(e));
      }
    }
    GANTRY_RETURN_IF_ERROR(ExpectOp(":"));
    if (!IsOp("]") && !IsOp(":")) {
      PARSE_OR_RETURN(parts[1], ParseExpression(true));
    }
    if (SkipOp(":")) {
      if (!IsOp("]")) {
        PARSE_OR_RETURN(parts[2], ParseExpression(true));
      }
    }
    GANTRY_RETURN_IF_ERROR(ExpectOp("]"));
    ExprPtr e = New(EK::kSlice, line);
    e->args.push_back(std::move(node));
    for (auto& p : parts) e->args.push_back(std::move(p));
    return Finish(std::move(e));
  }

  // Parses `(args, name=value)` into e->args (after those already there) and e->kwargs.
  absl::Status ParseCallArgs(Expr* e) {
    GANTRY_RETURN_IF_ERROR(ExpectOp("("));
    bool first = true;
    while (!IsOp(")")) {
      if (!first) GANTRY_RETURN_IF_ERROR(ExpectOp(","));
      first = false;
      if (IsOp(")")) break;
      if (IsOp("*") || IsOp("**")) return Fail("*args and **kwargs in calls are not supported");
      if (Cur().kind == TokenKind::kName && Peek().kind == TokenKind::kOperator && Peek().text == "=") {
        std::string key = Cur().text;
        Next();
        Next();
        PARSE_OR_RETURN(ExprPtr value, ParseExpression(true));
        e->kwargs.emplace_back(std::move(key), std::move(value));
      } else {
        if (!e->kwargs.empty()) return Fail("positional argument follows keyword argument");
        PARSE_OR_RETURN(ExprPtr value, ParseExpression(true));
        e->args.push_back(std::move(value));
      }
    }
    Next();
    return absl::OkStatus();
  }

  absl::StatusOr<ExprPtr> ParseCall(ExprPtr callee) {
    ExprPtr e = New(EK::kCall, Cur().line);
    e->args.push_back(std::move(callee));
    GANTRY_RETURN_IF_ERROR(ParseCallArgs(e.get()));
    return Finish(std::move(e));
  }

  absl::StatusOr<std::string> ParseDottedName() {
    if (Cur().kind != TokenKind::kName) return Unexpected("a name");
    std::string name = Cur().text;
    Next();
    while (IsOp(".") && Peek().kind == TokenKind::kName) {
      Next();
      name += "." + Cur().text;
      Next();
    }
    return name;
  }

  // `| f(args) | g ...`; with start_inline the first filter has no `|` ({% filter %}).
  absl::StatusOr<ExprPtr> ParseFilters(ExprPtr node, bool start_inline) {
    while (IsOp("|") || start_inline) {
      if (!start_inline) Next();
      start_inline = false;
      ExprPtr e = New(EK::kFilter, Cur().line);
      PARSE_OR_RETURN(e->name, ParseDottedName());
      e->args.push_back(std::move(node));
      if (IsOp("(")) GANTRY_RETURN_IF_ERROR(ParseCallArgs(e.get()));
      PARSE_OR_RETURN(node, Finish(std::move(e)));
    }
    return node;
  }

  absl::StatusOr<ExprPtr> ParseFilterExpr(ExprPtr node) {
    while (true) {
      if (IsOp("|")) {
        PARSE_OR_RETURN(node, ParseFilters(std::move(node), false));
      } else if (IsName("is")) {
        int line = Cur().line;
        Next();
        ExprPtr e = New(EK::kTest, line);
        e->negated = SkipName("not");
        PARSE_OR_RETURN(e->name, ParseDottedName());
        e->args.push_back(std::move(node));
        const Token& t = Cur();
        if (IsOp("(")) {
          GANTRY_RETURN_IF_ERROR(ParseCallArgs(e.get()));
        } else if ((t.kind == TokenKind::kName || t.kind == TokenKind::kString ||
                    t.kind == TokenKind::kInteger || t.kind == TokenKind::kFloat || IsOp("[") ||
                    IsOp("{")) &&
                   !IsName("else") && !IsName("or") && !IsName("and")) {
          if (IsName("is")) return Fail("you cannot chain multiple tests with is");
          DepthGuard guard(&recursion_);
          if (recursion_ > limits_.max_expr_depth) return Fail("expression is nested too deeply");
          PARSE_OR_RETURN(ExprPtr arg, ParsePrimary());
          PARSE_OR_RETURN(arg, ParsePostfix(std::move(arg)));
          e->args.push_back(std::move(arg));
        }
        PARSE_OR_RETURN(node, Finish(std::move(e)));
      } else if (IsOp("(")) {
        PARSE_OR_RETURN(node, ParseCall(std::move(node)));
      } else {
        return node;
      }
    }
  }

  const std::vector<Token>& t_;
  ParserLimits limits_;
  size_t p_ = 0;
  int recursion_ = 0;
  int block_depth_ = 0;
  int loop_depth_ = 0;
  size_t nodes_ = 0;
  bool saw_varargs_ = false;
  bool saw_kwargs_ = false;
};

}  // namespace

absl::StatusOr<ast::Body> Parse(const std::vector<Token>& tokens, const ParserLimits& limits) {
  if (tokens.empty() || tokens.back().kind != TokenKind::kEnd) {
    return TemplateError(1, "token stream does not end with kEnd");
  }
  return Parser(tokens, limits).Run();
}

}  // namespace gantry::jinja
