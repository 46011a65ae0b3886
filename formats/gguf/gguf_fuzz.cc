// Fuzz target: the GGUF reader (model files are outside bytes). Invariant: FromBytes
// never crashes; every tensor it accepts lies inside the input; decoding the first row
// of every accepted tensor (any bit pattern of every block format) never crashes.
#include <cstdlib>
#include <vector>

#include "formats/gguf/gguf.h"
#include "formats/gguf/quant.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = gantry::gguf::GgufFile::FromBytes(
      absl::string_view(reinterpret_cast<const char*>(data), size));
  if (!file.ok()) return 0;
  std::vector<float> row;
  for (const auto& t : (*file)->tensors()) {
    if (t.data < data || t.data + t.bytes > data + size) std::abort();
    if (t.dims.empty() || t.dims[0] > (1u << 16) || t.elements < t.dims[0]) continue;
    row.resize(t.dims[0]);
    (void)gantry::gguf::DecodeRow(t.data, t.type, t.dims[0], row.data());
  }
  return 0;
}
