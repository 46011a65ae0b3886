// Fuzz target: the GGUF reader (model files are outside bytes). Invariant: FromBytes
// never crashes; every tensor it accepts lies inside the input.
#include <cstdlib>

#include "worker/gguf/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = gantry::gguf::GgufFile::FromBytes(
      absl::string_view(reinterpret_cast<const char*>(data), size));
  if (!file.ok()) return 0;
  for (const auto& t : (*file)->tensors()) {
    if (t.data < data || t.data + t.bytes > data + size) std::abort();
  }
  return 0;
}
