// Property: decode(encode(x)) is x after the tokenizer's normalizer, for random valid
// UTF-8 x: NFC(x) for Qwen 3 (its normalizer is NFC), x itself for Llama 3 (none).
// Both are byte-level, so nothing may be lost. Specials are encoded as text, so that
// random text that happens to spell a control token still round-trips.
#include <cstdlib>
#include <random>
#include <string>

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>

#include "common/utf8.h"
#include "gtest/gtest.h"
#include "tokenizer-svc/tokenizer/tokenizer.h"

namespace gantry::tokenizer {
namespace {

std::string Nfc(const std::string& s) {
  UErrorCode status = U_ZERO_ERROR;
  std::string out;
  icu::StringByteSink<std::string> sink(&out);
  icu::Normalizer2::getNFCInstance(status)->normalizeUTF8(0, s, sink, nullptr, status);
  return out;
}

// Mostly ASCII and spaces, with Latin-1, combining marks, CJK, Hangul, emoji, unusual
// whitespace and the rest of the code space (no surrogates).
std::string RandomText(std::mt19937* rng) {
  std::uniform_int_distribution<int> length(0, 40), kind(0, 9);
  std::string out;
  int n = length(*rng);
  for (int i = 0; i < n; ++i) {
    uint32_t cp;
    switch (kind(*rng)) {
      case 0: case 1: case 2: cp = 0x20 + (*rng)() % 0x5F; break;
      case 3: cp = " \t\n\r"[(*rng)() % 4]; break;
      case 4: cp = 0xA0 + (*rng)() % 0x160; break;
      case 5: cp = 0x300 + (*rng)() % 0x70; break;
      case 6: cp = 0x4E00 + (*rng)() % 0x5000; break;
      case 7: cp = 0xAC00 + (*rng)() % 0x2BA4; break;
      case 8: {
        static const uint32_t kOdd[] = {0x85, 0x1680, 0x2002, 0x200D, 0x2028, 0x3000, 0xFEFF, 0x1F600, 0x1F3FB};
        cp = kOdd[(*rng)() % (sizeof(kOdd) / sizeof(kOdd[0]))];
        break;
      }
      default:
        do cp = (*rng)() % 0x110000; while (cp >= 0xD800 && cp <= 0xDFFF);
    }
    AppendUtf8(cp, &out);
  }
  return out;
}

void CheckRoundTrip(const std::string& name, bool nfc) {
  const char* root = std::getenv("GANTRY_REFERENCE_DIR");
  ASSERT_TRUE(root != nullptr && *root != '\0')
      << "GANTRY_REFERENCE_DIR is not set: it must name the shared reference folder";
  auto tokenizer = Tokenizer::Load(std::string(root) + "/tokenizers/" + name);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  std::mt19937 rng(20240531);
  EncodeOptions options;
  options.split_special = true;
  int failures = 0;
  for (int i = 0; i < 3000 && failures < 5; ++i) {
    std::string text = RandomText(&rng);
    auto ids = (*tokenizer)->Encode(text, options);
    ASSERT_TRUE(ids.ok()) << ids.status();
    auto back = (*tokenizer)->Decode(*ids);
    ASSERT_TRUE(back.ok()) << back.status();
    std::string want = nfc ? Nfc(text) : text;
    if (*back != want) {
      ++failures;
      ADD_FAILURE() << name << ": round trip differs for input of " << text.size() << " bytes";
    }
  }
}

TEST(RoundTrip, Qwen3IsNfc) { CheckRoundTrip("qwen3", true); }
TEST(RoundTrip, Llama3IsIdentity) { CheckRoundTrip("llama3", false); }

}  // namespace
}  // namespace gantry::tokenizer
