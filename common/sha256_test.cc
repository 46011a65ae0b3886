#include "common/sha256.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace gantry {
namespace {

// FIPS 180-2 test vectors.
TEST(Sha256Test, KnownVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256Test, TokenIdsAreHashedAsLittleEndianInt32) {
  // python3: hashlib.sha256(struct.pack('<3i', 1, 2, -1)).hexdigest()
  EXPECT_EQ(TokenIdsSha256Hex({1, 2, -1}),
            "0a1ce634879f6a487527c9a185b1a4a3de7f41238ad4139e3c6d9e0da723628c");
  EXPECT_EQ(TokenIdsSha256Hex({}), Sha256Hex(""));
}

TEST(Sha256Test, IncrementalEqualsOneShot) {
  std::string data(100000, 'x');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 31);
  Sha256 hash;
  for (size_t i = 0; i < data.size(); i += 777) hash.Update(absl::string_view(data).substr(i, 777));
  EXPECT_EQ(hash.HexDigest(), Sha256Hex(data));
}

TEST(Sha256Test, FileHashAndProgress) {
  std::string dir = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  std::string path = dir + "/sha256_test.bin";
  std::string data(3 * (1 << 20) + 5, 'q');
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fwrite(data.data(), 1, data.size(), f);
  std::fclose(f);
  uint64_t last = 0, total = 0;
  int calls = 0;
  auto hex = Sha256File(path, [&](uint64_t done, uint64_t size) {
    EXPECT_GT(done, last);
    last = done;
    total = size;
    ++calls;
  });
  ASSERT_TRUE(hex.ok()) << hex.status();
  EXPECT_EQ(*hex, Sha256Hex(data));
  EXPECT_EQ(last, data.size());
  EXPECT_EQ(total, data.size());
  EXPECT_EQ(calls, 4);
}

TEST(Sha256Test, MissingFileIsNotFound) {
  auto hex = Sha256File("/nonexistent/gantry/file");
  EXPECT_EQ(hex.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(hex.status().message().find("/nonexistent/gantry/file"), absl::string_view::npos);
}

}  // namespace
TEST(Sha256Test, TokenIdsAreHashedAsLittleEndianInt32s) {
  // 1 and 258 -> 01 00 00 00 02 01 00 00; -1 -> ff ff ff ff.
  EXPECT_EQ(TokenIdsSha256Hex({1, 258}), Sha256Hex(std::string("\x01\0\0\0\x02\x01\0\0", 8)));
  EXPECT_EQ(TokenIdsSha256Hex({-1}), Sha256Hex("\xff\xff\xff\xff"));
  EXPECT_EQ(TokenIdsSha256Hex({}), Sha256Hex(""));
}

}  // namespace gantry
