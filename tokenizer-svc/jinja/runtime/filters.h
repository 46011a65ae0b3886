// Internal to the interpreter: Jinja2's built-in filters with their Python semantics,
// plus Hugging Face's tojson (json.dumps(x, ensure_ascii=False, indent=, separators=,
// sort_keys=), keys in insertion order, 1.0 kept as 1.0).
//
// Supported: abs attr batch capitalize center count d default dictsort e escape first
// float forceescape format indent int items join last length list lower map max min
// reject rejectattr replace reverse round safe select selectattr sort string sum title
// tojson trim unique upper wordcount. Not supported (an error when the filter runs, as Jinja2
// reports unknown filters): groupby pprint random slice striptags truncate urlencode
// urlize wordwrap xmlattr filesizeformat.
//
// Thread-safety: pure functions of their arguments and the Env.
#ifndef GANTRY_TOKENIZER_SVC_JINJA_RUNTIME_FILTERS_H_
#define GANTRY_TOKENIZER_SVC_JINJA_RUNTIME_FILTERS_H_

#include <string>

#include "absl/status/statusor.h"
#include "tokenizer-svc/jinja/runtime/env.h"
#include "tokenizer-svc/jinja/value.h"

namespace gantry::jinja {

bool HasFilter(const std::string& name);
absl::StatusOr<Value> ApplyFilter(Env& env, const std::string& name, const Value& value,
                                  const CallArgs& args);

// Jinja2's tests (`x is name(args)`): defined undefined none string mapping iterable
// number integer float sequence boolean true false callable in eq equalto == ne != lt <
// lessthan le <= gt > greaterthan ge >= odd even divisibleby sameas lower upper escaped
// filter test.
bool HasTest(const std::string& name);
absl::StatusOr<bool> ApplyTest(Env& env, const std::string& name, const Value& value,
                               const CallArgs& args);

}  // namespace gantry::jinja

#endif  // GANTRY_TOKENIZER_SVC_JINJA_RUNTIME_FILTERS_H_
