#include "common/file.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

namespace gantry {
namespace {

TEST(FileTest, ReadsWholeFilesWithinTheLimit) {
  const char* dir = std::getenv("TEST_TMPDIR");
  std::string path = std::string(dir ? dir : "/tmp") + "/file_test.bin";
  std::string data(200000, 'x');
  data[12345] = '\0';
  FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(data.data(), 1, data.size(), f);
  std::fclose(f);
  auto read = ReadFileToString(path);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(*read, data);
  EXPECT_EQ(ReadFileToString(path, 1000).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadFileToString(path + ".missing").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace gantry
