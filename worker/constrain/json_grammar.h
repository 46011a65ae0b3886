// Output valid by construction: a JSON Schema compiled into a grammar over bytes, and
// the matcher that follows one generation through it, byte by byte (docs/tool-protocols.md,
// "Constrained generation").
//
// The language is a subset of JSON chosen so that every text the matcher accepts as
// complete parses and validates against the schema:
//   - whitespace: before the root value at most 4 bytes of any kind (the "\n\n" a
//     model writes after its reasoning); inside it, where JSON allows it, one space or a
//     newline and at most kMaxIndent spaces or tabs (as llama.cpp's JSON Schema
//     grammars); never after the root value
//     (only the end of the generation may follow): a model cannot spend its tokens on
//     blank lines;
//   - numbers: -?(0|[1-9][0-9]{0,17})(\.[0-9]{1,20})? (no exponent); an integer
//     schema gets no fraction; the bounds (minimum, maximum and their exclusive forms)
//     are checked on every prefix: a digit is allowed only when some completion still
//     lies within them;
//   - strings: valid UTF-8, no control bytes, the escapes \" \\ \/ \b \f \n \r \t and
//     \uXXXX outside the surrogates; minLength / maxLength in code points;
//   - enum and const: exactly the values' compact JSON text (json::DumpCompact), those
//     of them that validate against their schema;
//   - objects: each key at most once; with additionalProperties false only the declared
//     properties (not those whose schema is `false`), written without escapes;
//     `}` only once every required key
//     is present and minProperties is met; maxProperties;
//   - arrays: prefixItems, items, minItems, maxItems;
//   - anyOf, and oneOf whose branches admit disjoint types, as alternatives followed
//     together (a set of stacks) until the bytes decide; $ref; allOf of one schema.
// Other assertions (pattern, patternProperties, propertyNames, dependentRequired,
// contains, uniqueItems, multipleOf, not, if/then/else, several allOf, keywords beside
// $ref or anyOf / oneOf, oneOf with overlapping branches, bounds past the number
// syntax's range) are what Fidelity decides: kExact refuses the schema when it is
// compiled; kRelaxed drops them, so the grammar allows a superset of the valid values
// and the validator after generation stays the check.
//
// Outside input: schemas come from clients, bytes from the model. Compile does work
// bounded by the compiled schema's size; Feed does work bounded by the matcher's stacks
// (at most kMaxStacks; past it a byte is refused).
//
// Thread-safety: a JsonGrammar is immutable and shared; a JsonMatcher is used by one
// generation at a time (copies are independent).
#ifndef GANTRY_WORKER_CONSTRAIN_JSON_GRAMMAR_H_
#define GANTRY_WORKER_CONSTRAIN_JSON_GRAMMAR_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/json_schema.h"

namespace gantry::constrain {

enum class Fidelity { kExact, kRelaxed };

constexpr int kMaxIndent = 20;
constexpr size_t kMaxStacks = 64;

class JsonGrammar {
 public:
  // Errors: INVALID_ARGUMENT with reason "unsupported_parameter" naming the keyword
  // (kExact only), e.g. "the constraint engine does not enforce `pattern` (at node 3)".
  static absl::StatusOr<std::shared_ptr<const JsonGrammar>> Compile(json_schema::Schema schema,
                                                                    Fidelity fidelity);
  // JSON mode (response_format json_object): any object.
  static std::shared_ptr<const JsonGrammar> AnyObject();

  // One function call of a hermes-style envelope: {"name": N, "arguments": A} where N is
  // one of `tools` (name, parameters as JSON text; "" for any object) and A validates
  // against that tool's parameters (their local $refs rewritten to stay local), with
  // `fidelity` for what those schemas assert. Errors: a parameters text that is not a
  // schema (invalid_request), or, kExact, what Compile refuses.
  struct Tool {
    std::string name;
    std::string parameters_json;
  };
  static absl::StatusOr<std::shared_ptr<const JsonGrammar>> ForToolCall(const std::vector<Tool>& tools,
                                                                        Fidelity fidelity);

  // The schema the grammar was compiled from (the `true` schema for AnyObject).
  const json_schema::Schema& schema() const { return schema_; }

  // What one value position allows; `plans_[i]` for the schema's node i, then the
  // synthetic "any value" plan. Public for the matcher in json_grammar.cc only.
  struct Plan {
    bool reject = false;             // no value (the `false` schema)
    std::vector<int> alternatives;   // anyOf / oneOf: the value is one of these plans
    bool has_literals = false;       // enum / const: exactly one of `literals`
    std::vector<std::string> literals;
    uint8_t types = 0x7f;            // json_schema::TypeBits allowed
    // Objects.
    std::map<std::string, int> properties;
    int additional = -1;             // plan of other keys; -1: no other keys
    std::vector<std::string> required;
    uint64_t min_properties = 0, max_properties = UINT64_MAX;
    // Arrays.
    std::vector<int> prefix_items;
    int items = -1;                  // plan past prefix_items; -1: no more items
    uint64_t min_items = 0, max_items = UINT64_MAX;
    // Strings (code points).
    uint64_t min_length = 0, max_length = UINT64_MAX;
    // Numbers, in units of 1e-20 (every number the syntax allows is a whole number of
    // them): the smallest and largest allowed value, inclusive.
    __int128 lo = 0, hi = 0;
    bool has_lo = false, has_hi = false;
  };
  const std::vector<Plan>& plans() const { return plans_; }
  int root() const { return root_; }
  int any() const { return static_cast<int>(plans_.size()) - 1; }

 private:
  JsonGrammar() = default;
  json_schema::Schema schema_;
  std::vector<Plan> plans_;
  int root_ = 0;
};

// Where one generation is in the grammar: the set of parser stacks the bytes so far
// leave possible (one, unless an anyOf has not been decided yet).
class JsonMatcher {
 public:
  // `suffix`: bytes that must follow the value (after at most one space or a newline
  // and indentation) before it is complete, e.g. "</tool_call>".
  explicit JsonMatcher(std::shared_ptr<const JsonGrammar> grammar, std::string suffix = "");

  // Advances by one byte. False (and the matcher unchanged) when no stack accepts it.
  bool Feed(uint8_t byte);
  bool Feed(absl::string_view bytes);  // all or nothing
  // The root value is complete: the generation may end here.
  bool Complete() const;
  // The state as bytes: two matchers of one grammar with equal keys accept the same
  // continuations (what a mask cache is keyed by).
  std::string Key() const;
  // Inside a string's contents on every stack, between characters, where any "plain"
  // text is accepted: bytes 0x20-0x7e but '"' and '\\', and whole UTF-8 characters.
  // Returns how many more code points the strings take (UINT64_MAX: no limit), or 0
  // when the state is not such a place.
  uint64_t PlainTextRoom() const;

  // One open value: a value not started yet, or an object, array, string, number or
  // literal being read (json_grammar.cc names the kinds and phases).
  struct Frame {
    uint8_t kind = 0;
    uint8_t phase = 0;
    uint8_t ws = 0;                 // the whitespace before the next token (json_grammar.cc)
    uint8_t esc = 0;                // strings: 1 after a backslash, 2..5 in a \u escape
    uint8_t need = 0;               // strings: UTF-8 continuation bytes to come
    uint8_t lo = 0x80, hi = 0xbf;   // strings: the next continuation byte's range
    uint16_t hex = 0;               // strings: the escape's hex digits so far
    int32_t plan = 0;
    int32_t child = -1;             // objects: the plan of the key just read
    uint64_t count = 0;             // strings: code points; arrays: items
    std::string buf;                // objects: the key; numbers: the text; literals: matched
    std::vector<std::string> seen;  // objects: keys so far, sorted
  };
  using Stack = std::vector<Frame>;

 private:
  void Step(Stack stack, uint8_t byte, std::vector<Stack>* out, int depth) const;
  void AppendStackKey(const Stack& stack, std::string* key) const;
  std::shared_ptr<const JsonGrammar> grammar_;
  std::string suffix_;
  std::vector<Stack> stacks_;
};

}  // namespace gantry::constrain

#endif  // GANTRY_WORKER_CONSTRAIN_JSON_GRAMMAR_H_
