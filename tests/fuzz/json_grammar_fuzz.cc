// Fuzz target: a JSON Schema compiled into the constraint grammar (both fidelities), then
// model bytes fed to its matcher. Input: frames as in tests/fuzz/fuzz_input.h: the
// schema's text, then the bytes. Invariants: nothing crashes or hangs; a byte the matcher
// refuses leaves its state unchanged; what an exact grammar accepts as whole parses as
// JSON and validates against the schema, and a relaxed grammar's whole text parses.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/json_schema.h"
#include "tests/fuzz/fuzz_input.h"
#include "worker/constrain/json_grammar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gantry;
  std::vector<std::string> frames = fuzz::SplitFrames(data, size);
  if (frames.size() < 2) return 0;
  auto schema = json_schema::Schema::CompileText(frames[0]);
  if (!schema.ok()) return 0;
  for (constrain::Fidelity fidelity : {constrain::Fidelity::kExact, constrain::Fidelity::kRelaxed}) {
    auto grammar = constrain::JsonGrammar::Compile(*schema, fidelity);
    if (!grammar.ok()) continue;
    constrain::JsonMatcher matcher(*grammar);
    std::string accepted;
    for (size_t i = 1; i < frames.size(); ++i) {
      for (char c : frames[i]) {
        const std::string before = matcher.Key();
        if (matcher.Feed(static_cast<uint8_t>(c))) {
          accepted.push_back(c);
        } else if (matcher.Key() != before) {
          std::abort();
        }
      }
    }
    if (!matcher.Complete()) continue;
    auto value = json::Parse(accepted);
    if (!value.ok()) std::abort();
    json_schema::ValidateOptions options;
    options.max_steps = 20000;
    if (fidelity == constrain::Fidelity::kExact) {
      std::vector<json_schema::Violation> violations = schema->Validate(*value, options);
      const bool out_of_budget =
          violations.size() == 1 && violations[0].message == "validation exceeded its work limit";
      if (!violations.empty() && !out_of_budget) std::abort();
    }
  }
  return 0;
}
