// Fuzz target: the JSON parser (HTTP bodies, tool-call arguments, tokenizer.json).
// Invariant: Parse never crashes; what it accepts dumps to text that parses back to an
// equal value, in both the ensure_ascii and the raw form.
#include <cstdlib>

#include "common/json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gantry::json;
  auto value = Parse(absl::string_view(reinterpret_cast<const char*>(data), size));
  if (!value.ok()) return 0;
  for (bool ascii : {false, true}) {
    DumpOptions options;
    options.ensure_ascii = ascii;
    auto again = Parse(Dump(*value, options));
    if (!again.ok() || !(*again == *value)) std::abort();
  }
  return 0;
}
