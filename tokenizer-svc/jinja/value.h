// Runtime values of the Jinja interpreter, with Python's semantics where templates can
// see them: truthiness, str()/repr(), ==, ordering, and the conversion to and from
// common/json values (numbers keep their int/float kind both ways, objects their order).
//
// Kinds: undefined (with a hint for the error it raises when used), none, bool, int
// (int64), float, string (UTF-8), list, tuple, dict (string keys, insertion order),
// namespace (the one mutable kind, shared by reference), callable (macro, builtin
// function or bound method) and loop (the `loop` variable of a for).
//
// Containers share their storage (copying a Value is O(1)) and are immutable once
// built, as under Jinja2's ImmutableSandboxedEnvironment. A Value records the height of
// its nesting (depth()) so that the interpreter can bound it and every recursive walk
// here stays bounded; a namespace never holds a namespace (the interpreter refuses),
// which rules out reference cycles.
//
// Thread-safety: a Value is not synchronised; namespaces are mutable through copies.
// Use one render's values on one thread.
#ifndef GANTRY_TOKENIZER_SVC_JINJA_VALUE_H_
#define GANTRY_TOKENIZER_SVC_JINJA_VALUE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/json.h"

namespace gantry::jinja {

namespace ast {
struct Stmt;
}  // namespace ast

class Value;
class Frame;  // runtime/interpreter.cc
using ValueList = std::vector<Value>;

// Insertion-ordered string-keyed map.
struct DictData {
  std::vector<std::pair<std::string, Value>> items;
  const Value* Find(absl::string_view key) const;
  void Set(std::string key, Value value);
};

struct LoopInfo {
  int64_t index0 = 0;
  std::shared_ptr<const ValueList> items;
  int64_t depth0 = 0;
};

struct Callable;

class Value {
 public:
  enum class Kind {
    kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kTuple, kDict, kNamespace,
    kCallable, kLoop,
  };

  Value() = default;  // undefined
  // `hint` is the message of the error raised when this undefined is used
  // ("'x' is undefined").
  static Value Undefined(std::string hint = {});
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double d);
  static Value String(std::string s);
  static Value List(ValueList items);
  static Value Tuple(ValueList items);
  static Value Dict(DictData data);
  static Value Namespace(DictData data);
  static Value MakeCallable(Callable c);
  static Value Loop(LoopInfo info);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  // int, float or bool (Python's numbers.Number).
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind_ == Kind::kString; }
  // list or tuple.
  bool is_sequence() const { return kind_ == Kind::kList || kind_ == Kind::kTuple; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_callable() const { return kind_ == Kind::kCallable; }
  bool is_loop() const { return kind_ == Kind::kLoop; }

  // Preconditions: the matching kind.
  bool as_bool() const { return b_; }
  int64_t as_int() const { return i_; }        // int or bool
  double as_float() const { return f_; }       // float
  double as_double() const;                    // any number
  const std::string& str() const;              // string
  const ValueList& list() const;               // list or tuple
  const DictData& dict() const;                // dict or namespace
  DictData& mutable_namespace() const;         // namespace
  const Callable& callable() const;            // callable
  const LoopInfo& loop() const;                // loop
  const std::string& undefined_hint() const;   // undefined ("" when none)

  // Nesting height: 0 for scalars, 1 + the deepest element for containers.
  int depth() const { return depth_; }
  // Whether a namespace (or a loop, or a method bound to one) is reachable from here.
  bool has_namespace() const { return has_ns_; }
  // Identity for `is sameas` and namespace equality: the shared storage, or null.
  const void* identity() const { return ptr_.get(); }

 private:
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  bool has_ns_ = false;
  int depth_ = 0;
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<void> ptr_;  // string, ValueList, DictData, Callable or LoopInfo
};

struct Callable {
  enum class Kind { kMacro, kBuiltin, kMethod };
  Kind kind = Kind::kBuiltin;
  std::string name;            // builtin function, method or macro name
  Value self;                  // kMethod: the receiver
  const ast::Stmt* macro = nullptr;  // kMacro: owned by the Template
  std::weak_ptr<Frame> closure;      // kMacro: the frame it was defined in
};

// Python truthiness (undefined is false).
bool Truthy(const Value& v);
// Python's type name as errors show it: 'str', 'NoneType', 'Undefined', ...
std::string TypeName(const Value& v);
// Python str(): what {{ v }} prints ("" for undefined, "None", "True", "1.0", "[1, 'a']").
std::string ToStr(const Value& v);
// Python repr().
std::string Repr(const Value& v);
// Python ==.
bool Equals(const Value& a, const Value& b);
// Python ordering for < <= > >=: -1, 0 or 1; a TypeError message when not orderable.
absl::StatusOr<int> Compare(const Value& a, const Value& b);

// JSON -> Value: null none, objects dicts, arrays lists; integers that fit int64 are
// ints, others floats.
Value FromJson(const json::Value& v);
// Value -> JSON as json.dumps sees it (tuples are arrays). Fails, with Python's message,
// for undefined, namespaces, callables and loops.
absl::StatusOr<json::Value> ToJson(const Value& v);

}  // namespace gantry::jinja

#endif  // GANTRY_TOKENIZER_SVC_JINJA_VALUE_H_
