// Shared by fuzz targets: split a fuzzer's byte string into frames.
//
// Layout: repeated [length: 1 byte][bytes: length]; a length byte of 255 means "the rest
// of the input is one frame". This lets the fuzzer reach multi-frame messages quickly.
#ifndef GANTRY_TESTS_FUZZ_FUZZ_INPUT_H_
#define GANTRY_TESTS_FUZZ_FUZZ_INPUT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gantry::fuzz {

inline std::vector<std::string> SplitFrames(const uint8_t* data, size_t size) {
  std::vector<std::string> frames;
  size_t i = 0;
  while (i < size) {
    size_t n = data[i++];
    if (n == 255 || i + n > size) n = size - i;
    frames.emplace_back(reinterpret_cast<const char*>(data + i), n);
    i += n;
  }
  return frames;
}

}  // namespace gantry::fuzz

#endif  // GANTRY_TESTS_FUZZ_FUZZ_INPUT_H_
