#include "tokenizer-svc/jinja/runtime/interpreter.h"

#include <cmath>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "tokenizer-svc/jinja/error.h"
#include "tokenizer-svc/jinja/runtime/access.h"
#include "tokenizer-svc/jinja/runtime/env.h"
#include "tokenizer-svc/jinja/runtime/filters.h"
#include "tokenizer-svc/jinja/runtime/methods.h"
#include "tokenizer-svc/jinja/runtime/operators.h"

namespace gantry::jinja {

// One scope: the template's top level, a for-loop turn, a macro call or a with block.
class Frame {
 public:
  explicit Frame(std::shared_ptr<Frame> parent) : parent_(std::move(parent)) {}
  const Value* Lookup(const std::string& name) const {
    for (const Frame* f = this; f != nullptr; f = f->parent_.get()) {
      auto it = f->vars_.find(name);
      if (it != f->vars_.end()) return &it->second;
    }
    return nullptr;
  }
  void Set(const std::string& name, Value v) { vars_[name] = std::move(v); }

 private:
  std::shared_ptr<Frame> parent_;
  absl::flat_hash_map<std::string, Value> vars_;
};

namespace {

using ast::Expr;
using ast::Stmt;
using EK = ast::Expr::Kind;
using SK = ast::Stmt::Kind;
using FramePtr = std::shared_ptr<Frame>;

// Adds the template line to errors raised below the interpreter.
absl::Status AtLine(const absl::Status& status, int line) {
  if (status.ok() || ReasonOf(status) == "template_render_failed") return status;
  return TemplateError(line, status.message());
}

template <typename T>
absl::StatusOr<T> At(absl::StatusOr<T> r, int line) {
  if (!r.ok()) return AtLine(r.status(), line);
  return r;
}
#define TRY_AT(line, lhs, expr) GANTRY_ASSIGN_OR_RETURN(lhs, At((expr), line))
#define RETURN_AT(line, expr)                              \
  do {                                                     \
    absl::Status s_ = (expr);                              \
    if (!s_.ok()) return AtLine(s_, line);                 \
  } while (0)

// Bounds the interpreter's own recursion (statements in statements, expressions in
// expressions, macro calls), whatever the template does.
class NestingGuard {
 public:
  NestingGuard(int* depth, int limit) : depth_(depth) { ok_ = ++*depth_ <= limit; }
  ~NestingGuard() { --*depth_; }
  bool ok() const { return ok_; }

 private:
  int* depth_;
  bool ok_;
};

enum class Flow { kNormal, kBreak, kContinue };

class Renderer {
 public:
  Renderer(const DictData& context, const RenderOptions& options)
      : env_(options), context_(context) {}

  absl::StatusOr<std::string> Run(const ast::Body& body) {
    auto root = std::make_shared<Frame>(nullptr);
    std::string out;
    GANTRY_ASSIGN_OR_RETURN(Flow flow, ExecBody(body, root, &out));
    (void)flow;
    return out;
  }

 private:
  absl::Status Emit(const std::string& text, std::string* out, int line) {
    if (out->size() + text.size() > env_.options().max_output_bytes) {
      return TemplateError(line, "the rendered output grew beyond the limit");
    }
    RETURN_AT(line, env_.Charge(text.size()));
    out->append(text);
    return absl::OkStatus();
  }

  absl::StatusOr<Flow> ExecBody(const ast::Body& body, const FramePtr& frame, std::string* out) {
    NestingGuard guard(&nesting_, env_.options().max_nesting);
    if (!guard.ok()) return TemplateError(body.empty() ? 0 : body[0]->line, "the template nests too deeply");
    for (const auto& stmt : body) {
      RETURN_AT(stmt->line, env_.Step());
      GANTRY_ASSIGN_OR_RETURN(Flow flow, Exec(*stmt, frame, out));
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  // Renders `body` into a fresh string (block set, filter blocks, macros).
  absl::StatusOr<std::string> Capture(const ast::Body& body, const FramePtr& frame) {
    std::string text;
    GANTRY_ASSIGN_OR_RETURN(Flow flow, ExecBody(body, frame, &text));
    (void)flow;
    return text;
  }

  absl::StatusOr<Flow> Exec(const Stmt& s, const FramePtr& frame, std::string* out) {
    switch (s.kind) {
      case SK::kText:
        GANTRY_RETURN_IF_ERROR(Emit(s.text, out, s.line));
        return Flow::kNormal;
      case SK::kOutput: {
        GANTRY_ASSIGN_OR_RETURN(Value v, Eval(*s.expr, frame));
        GANTRY_RETURN_IF_ERROR(Emit(ToStr(v), out, s.line));
        return Flow::kNormal;
      }
      case SK::kIf: {
        GANTRY_ASSIGN_OR_RETURN(Value cond, Eval(*s.expr, frame));
        return ExecBody(Truthy(cond) ? s.body : s.else_body, frame, out);
      }
      case SK::kFor: return ExecFor(s, frame, out);
      case SK::kSet: {
        GANTRY_ASSIGN_OR_RETURN(Value v, Eval(*s.expr, frame));
        GANTRY_RETURN_IF_ERROR(Assign(*s.target, v, frame));
        return Flow::kNormal;
      }
      case SK::kSetBlock: {
        GANTRY_ASSIGN_OR_RETURN(std::string text, Capture(s.body, frame));
        Value v = Value::String(std::move(text));
        if (s.expr) {
          GANTRY_ASSIGN_OR_RETURN(v, EvalWithInput(*s.expr, frame, v));
        }
        GANTRY_RETURN_IF_ERROR(Assign(*s.target, v, frame));
        return Flow::kNormal;
      }
      case SK::kMacro: {
        Callable c;
        c.kind = Callable::Kind::kMacro;
        c.name = s.name;
        c.macro = &s;
        c.closure = frame;
        frame->Set(s.name, Value::MakeCallable(std::move(c)));
        return Flow::kNormal;
      }
      case SK::kFilterBlock: {
        GANTRY_ASSIGN_OR_RETURN(std::string text, Capture(s.body, frame));
        GANTRY_ASSIGN_OR_RETURN(Value v, EvalWithInput(*s.expr, frame, Value::String(std::move(text))));
        GANTRY_RETURN_IF_ERROR(Emit(ToStr(v), out, s.line));
        return Flow::kNormal;
      }
      case SK::kBreak: return Flow::kBreak;
      case SK::kContinue: return Flow::kContinue;
      case SK::kWith: {
        auto inner = std::make_shared<Frame>(frame);
        std::vector<Value> values;
        for (const auto& v : s.values) {
          GANTRY_ASSIGN_OR_RETURN(Value value, Eval(*v, frame));
          values.push_back(std::move(value));
        }
        for (size_t i = 0; i < values.size(); ++i) {
          GANTRY_RETURN_IF_ERROR(Assign(*s.targets[i], values[i], inner));
        }
        return ExecBody(s.body, inner, out);
      }
      case SK::kScope: return ExecBody(s.body, frame, out);
    }
    return Flow::kNormal;
  }

  absl::StatusOr<Flow> ExecFor(const Stmt& s, const FramePtr& frame, std::string* out) {
    GANTRY_ASSIGN_OR_RETURN(Value iterable, Eval(*s.expr, frame));
    TRY_AT(s.line, ValueList items, Iterate(iterable));
    if (s.cond) {
      ValueList kept;
      for (const Value& item : items) {
        auto probe = std::make_shared<Frame>(frame);
        GANTRY_RETURN_IF_ERROR(Assign(*s.target, item, probe));
        GANTRY_ASSIGN_OR_RETURN(Value keep, Eval(*s.cond, probe));
        if (Truthy(keep)) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) return ExecBody(s.else_body, frame, out);
    auto shared = std::make_shared<const ValueList>(std::move(items));
    for (size_t i = 0; i < shared->size(); ++i) {
      RETURN_AT(s.line, env_.Step());
      auto turn = std::make_shared<Frame>(frame);
      GANTRY_RETURN_IF_ERROR(Assign(*s.target, (*shared)[i], turn));
      LoopInfo info;
      info.index0 = static_cast<int64_t>(i);
      info.items = shared;
      turn->Set("loop", Value::Loop(std::move(info)));
      GANTRY_ASSIGN_OR_RETURN(Flow flow, ExecBody(s.body, turn, out));
      if (flow == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  absl::Status Assign(const Expr& target, const Value& v, const FramePtr& frame) {
    if (target.kind == EK::kName) {
      frame->Set(target.name, v);
      return absl::OkStatus();
    }
    if (target.kind == EK::kGetAttr) {
      GANTRY_ASSIGN_OR_RETURN(Value ns, Eval(*target.args[0], frame));
      if (!ns.is_namespace()) {
        return TemplateError(target.line, "cannot assign attribute on non-namespace object");
      }
      if (v.has_namespace()) {
        return TemplateError(target.line, "a namespace cannot hold a namespace or a loop");
      }
      if (v.depth() + 1 > env_.options().max_value_depth) {
        return TemplateError(target.line, "a value is nested too deeply");
      }
      ns.mutable_namespace().Set(target.name, v);
      return absl::OkStatus();
    }
    // A tuple of names: unpack.
    TRY_AT(target.line, ValueList items, Iterate(v));
    size_t want = target.args.size();
    if (items.size() != want) {
      return TemplateError(target.line, items.size() > want
                                            ? absl::StrCat("too many values to unpack (expected ", want, ")")
                                            : absl::StrCat("not enough values to unpack (expected ", want,
                                                           ", got ", items.size(), ")"));
    }
    for (size_t i = 0; i < want; ++i) GANTRY_RETURN_IF_ERROR(Assign(*target.args[i], items[i], frame));
    return absl::OkStatus();
  }

  absl::StatusOr<Value> EvalWithInput(const Expr& e, const FramePtr& frame, const Value& input) {
    const Value* saved = block_input_;
    block_input_ = &input;
    absl::StatusOr<Value> v = Eval(e, frame);
    block_input_ = saved;
    return v;
  }

  absl::StatusOr<CallArgs> EvalArgs(const Expr& e, size_t first, const FramePtr& frame) {
    CallArgs args;
    for (size_t i = first; i < e.args.size(); ++i) {
      GANTRY_ASSIGN_OR_RETURN(Value v, Eval(*e.args[i], frame));
      args.pos.push_back(std::move(v));
    }
    for (const auto& kw : e.kwargs) {
      GANTRY_ASSIGN_OR_RETURN(Value v, Eval(*kw.second, frame));
      args.kw.emplace_back(kw.first, std::move(v));
    }
    return args;
  }

  absl::StatusOr<Value> Eval(const Expr& e, const FramePtr& frame) {
    RETURN_AT(e.line, env_.Step());
    NestingGuard guard(&nesting_, env_.options().max_nesting);
    if (!guard.ok()) return TemplateError(e.line, "the template nests too deeply");
    switch (e.kind) {
      case EK::kLiteral: return e.literal;
      case EK::kName: {
        if (const Value* v = frame->Lookup(e.name)) return *v;
        if (const Value* v = context_.Find(e.name)) return *v;
        if (IsBuiltin(e.name)) return BuiltinValue(e.name);
        return Value::Undefined(absl::StrCat("'", e.name, "' is undefined"));
      }
      case EK::kList:
      case EK::kTuple: {
        ValueList items;
        for (const auto& a : e.args) {
          GANTRY_ASSIGN_OR_RETURN(Value v, Eval(*a, frame));
          items.push_back(std::move(v));
        }
        Value v = e.kind == EK::kList ? Value::List(std::move(items)) : Value::Tuple(std::move(items));
        RETURN_AT(e.line, env_.CheckValue(v));
        return v;
      }
      case EK::kDict: {
        DictData d;
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          GANTRY_ASSIGN_OR_RETURN(Value k, Eval(*e.args[i], frame));
          GANTRY_ASSIGN_OR_RETURN(Value v, Eval(*e.args[i + 1], frame));
          if (!k.is_string()) return TemplateError(e.line, "only string dict keys are supported");
          d.Set(k.str(), std::move(v));
        }
        Value v = Value::Dict(std::move(d));
        RETURN_AT(e.line, env_.CheckValue(v));
        return v;
      }
      case EK::kGetAttr: {
        GANTRY_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0], frame));
        TRY_AT(e.line, Value v, GetAttr(obj, e.name));
        return v;
      }
      case EK::kGetItem: {
        GANTRY_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0], frame));
        GANTRY_ASSIGN_OR_RETURN(Value key, Eval(*e.args[1], frame));
        TRY_AT(e.line, Value v, GetItem(obj, key));
        return v;
      }
      case EK::kSlice: {
        GANTRY_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0], frame));
        absl::optional<int64_t> parts[3];
        for (int i = 0; i < 3; ++i) {
          if (!e.args[i + 1]) continue;
          GANTRY_ASSIGN_OR_RETURN(Value p, Eval(*e.args[i + 1], frame));
          if (p.is_none()) continue;
          if (!p.is_int() && !p.is_bool()) {
            return TemplateError(e.line, "slice indices must be integers or None");
          }
          parts[i] = p.as_int();
        }
        TRY_AT(e.line, Value v, Slice(obj, parts[0], parts[1], parts[2]));
        return v;
      }
      case EK::kCall: {
        GANTRY_ASSIGN_OR_RETURN(Value callee, Eval(*e.args[0], frame));
        GANTRY_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1, frame));
        return Call(callee, args, e.line);
      }
      case EK::kFilter: {
        Value v;
        if (e.args[0]) {
          GANTRY_ASSIGN_OR_RETURN(v, Eval(*e.args[0], frame));
        } else {
          if (block_input_ == nullptr) return TemplateError(e.line, "filter block without input");
          v = *block_input_;
        }
        GANTRY_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1, frame));
        TRY_AT(e.line, Value out, ApplyFilter(env_, e.name, v, args));
        RETURN_AT(e.line, env_.CheckValue(out));
        return out;
      }
      case EK::kTest: {
        GANTRY_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0], frame));
        GANTRY_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1, frame));
        TRY_AT(e.line, bool r, ApplyTest(env_, e.name, v, args));
        return Value::Bool(r != e.negated);
      }
      case EK::kNot: {
        GANTRY_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0], frame));
        return Value::Bool(!Truthy(v));
      }
      case EK::kNeg:
      case EK::kPos: {
        GANTRY_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0], frame));
        TRY_AT(e.line, Value r, UnaryOp(e.kind == EK::kNeg ? '-' : '+', v));
        return r;
      }
      case EK::kBinary: {
        GANTRY_ASSIGN_OR_RETURN(Value a, Eval(*e.args[0], frame));
        GANTRY_ASSIGN_OR_RETURN(Value b, Eval(*e.args[1], frame));
        TRY_AT(e.line, Value r, BinaryOp(env_, e.name, a, b));
        return r;
      }
      case EK::kCompare: {
        GANTRY_ASSIGN_OR_RETURN(Value left, Eval(*e.args[0], frame));
        for (size_t i = 0; i < e.ops.size(); ++i) {
          GANTRY_ASSIGN_OR_RETURN(Value right, Eval(*e.args[i + 1], frame));
          TRY_AT(e.line, bool r, CompareOp(e.ops[i], left, right));
          if (!r) return Value::Bool(false);
          left = std::move(right);
        }
        return Value::Bool(true);
      }
      case EK::kAnd:
      case EK::kOr: {
        GANTRY_ASSIGN_OR_RETURN(Value a, Eval(*e.args[0], frame));
        if (Truthy(a) == (e.kind == EK::kOr)) return a;
        return Eval(*e.args[1], frame);
      }
      case EK::kCond: {
        GANTRY_ASSIGN_OR_RETURN(Value cond, Eval(*e.args[0], frame));
        if (Truthy(cond)) return Eval(*e.args[1], frame);
        if (e.args[2]) return Eval(*e.args[2], frame);
        return Value::Undefined(absl::StrCat("the inline if-expression on line ", e.line,
                                             " evaluated to false and no else section was defined."));
      }
      case EK::kBlockInput:
        if (block_input_ == nullptr) return TemplateError(e.line, "filter block without input");
        return *block_input_;
    }
    return TemplateError(e.line, "unknown expression");
  }

  absl::StatusOr<Value> Call(const Value& callee, const CallArgs& args, int line) {
    if (callee.is_undefined()) return AtLine(UndefinedError(callee), line);
    if (!callee.is_callable()) {
      return TemplateError(line, absl::StrCat("'", TypeName(callee), "' object is not callable"));
    }
    const Callable& c = callee.callable();
    absl::StatusOr<Value> result;
    switch (c.kind) {
      case Callable::Kind::kBuiltin: result = CallBuiltin(env_, c.name, args); break;
      case Callable::Kind::kMethod: result = CallMethod(env_, c.self, c.name, args); break;
      case Callable::Kind::kMacro: result = CallMacro(c, args, line); break;
    }
    if (!result.ok()) return AtLine(result.status(), line);
    RETURN_AT(line, env_.CheckValue(*result));
    return result;
  }

  absl::StatusOr<Value> CallMacro(const Callable& c, const CallArgs& args, int line) {
    const Stmt& m = *c.macro;
    FramePtr closure = c.closure.lock();
    if (!closure) return TemplateError(line, absl::StrCat("macro '", c.name, "' outlived its scope"));
    if (call_depth_ >= env_.options().max_call_depth) {
      return TemplateError(line, "macro calls are nested too deeply");
    }
    auto frame = std::make_shared<Frame>(closure);
    size_t n = m.params.size();
    if (args.pos.size() > n && !m.uses_varargs) {
      return TemplateError(line, absl::StrCat("macro '", m.name, "' takes not more than ", n, " argument(s)"));
    }
    std::vector<bool> given(n, false);
    for (size_t i = 0; i < args.pos.size() && i < n; ++i) {
      frame->Set(m.params[i], args.pos[i]);
      given[i] = true;
    }
    DictData extra_kw;
    for (const auto& kw : args.kw) {
      size_t i = 0;
      while (i < n && m.params[i] != kw.first) ++i;
      if (i == n) {
        if (!m.uses_kwargs) {
          return TemplateError(line, absl::StrCat("macro '", m.name, "' takes no keyword argument '", kw.first, "'"));
        }
        extra_kw.Set(kw.first, kw.second);
        continue;
      }
      if (given[i]) {
        return TemplateError(line, absl::StrCat("macro '", m.name, "' got multiple values for argument '", kw.first, "'"));
      }
      frame->Set(m.params[i], kw.second);
      given[i] = true;
    }
    ++call_depth_;
    for (size_t i = 0; i < n; ++i) {
      if (given[i]) continue;
      if (m.defaults[i]) {
        absl::StatusOr<Value> d = Eval(*m.defaults[i], frame);
        if (!d.ok()) {
          --call_depth_;
          return d.status();
        }
        frame->Set(m.params[i], *d);
      } else {
        frame->Set(m.params[i], Value::Undefined(absl::StrCat("parameter '", m.params[i], "' was not provided")));
      }
    }
    if (m.uses_varargs) {
      ValueList rest;
      for (size_t i = n; i < args.pos.size(); ++i) rest.push_back(args.pos[i]);
      frame->Set("varargs", Value::Tuple(std::move(rest)));
    }
    if (m.uses_kwargs) frame->Set("kwargs", Value::Dict(std::move(extra_kw)));
    absl::StatusOr<std::string> text = Capture(m.body, frame);
    --call_depth_;
    if (!text.ok()) return text.status();
    return Value::String(*std::move(text));
  }

  Env env_;
  const DictData& context_;
  const Value* block_input_ = nullptr;
  int call_depth_ = 0;
  int nesting_ = 0;
};

}  // namespace

absl::StatusOr<std::shared_ptr<const Template>> Template::Parse(absl::string_view source,
                                                                const LexerLimits& lexer,
                                                                const ParserLimits& parser) {
  GANTRY_ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(source, lexer));
  GANTRY_ASSIGN_OR_RETURN(ast::Body body, jinja::Parse(tokens, parser));
  return std::shared_ptr<const Template>(std::make_shared<Template>(std::move(body)));
}

absl::StatusOr<std::string> Template::Render(const DictData& context,
                                             const RenderOptions& options) const {
  Renderer renderer(context, options);
  return renderer.Run(body_);
}

}  // namespace gantry::jinja
