#include "tokenizer-svc/tokenizer/byte_level.h"

#include <array>

#include "common/utf8.h"

namespace gantry::tokenizer {
namespace {

struct Tables {
  std::array<uint32_t, 256> to_code_point{};
  std::array<int16_t, 324> to_byte{};  // code points 0..323 cover the whole alphabet

  Tables() {
    to_byte.fill(-1);
    uint32_t next_extra = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      to_code_point[b] = printable ? static_cast<uint32_t>(b) : next_extra++;
      to_byte[to_code_point[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& GetTables() {
  static const Tables* tables = new Tables();
  return *tables;
}

}  // namespace

uint32_t ByteLevelCodePoint(uint8_t b) { return GetTables().to_code_point[b]; }

int ByteLevelByte(uint32_t code_point) {
  const Tables& t = GetTables();
  return code_point < t.to_byte.size() ? t.to_byte[code_point] : -1;
}

void AppendByteLevelText(absl::string_view bytes, std::string* out) {
  const Tables& t = GetTables();
  for (char c : bytes) AppendUtf8(t.to_code_point[static_cast<uint8_t>(c)], out);
}

bool AppendByteLevelBytes(absl::string_view text, std::string* out) {
  size_t old_size = out->size();
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    size_t n = Utf8SequenceLength(text, i, &cp);
    int b = n == 0 ? -1 : ByteLevelByte(cp);
    if (b < 0) {
      out->resize(old_size);
      return false;
    }
    out->push_back(static_cast<char>(b));
    i += n;
  }
  return true;
}

}  // namespace gantry::tokenizer
