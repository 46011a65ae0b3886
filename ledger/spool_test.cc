#include "ledger/spool.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace gantry::ledger {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  std::string path = std::string(dir ? dir : "/tmp") + "/" + name;
  ::unlink(path.c_str());
  return path;
}

v1::LedgerEvent Event(int i) {
  v1::LedgerEvent e;
  e.set_event_id("evt_" + std::to_string(i));
  e.set_stream_id("req_s");
  e.set_seq(i);
  e.set_payload_json(std::string(i * 7, 'p'));
  return e;
}

TEST(SpoolTest, AppendsReadBackInOrderAndClear) {
  auto spool = Spool::Open(TempPath("a.log"));
  ASSERT_TRUE(spool.ok()) << spool.status();
  EXPECT_TRUE((*spool)->empty());
  ASSERT_TRUE((*spool)->Append({Event(0), Event(1)}).ok());
  ASSERT_TRUE((*spool)->Append({Event(2)}).ok());
  auto all = (*spool)->ReadAll();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ((*all)[i].event_id(), "evt_" + std::to_string(i));

  size_t next = 0;
  auto first = (*spool)->ReadFrom(0, 2, &next);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->size(), 2u);
  auto rest = (*spool)->ReadFrom(next, 2, &next);
  ASSERT_EQ(rest->size(), 1u);
  EXPECT_EQ((*rest)[0].event_id(), "evt_2");

  ASSERT_TRUE((*spool)->Clear().ok());
  EXPECT_TRUE((*spool)->empty());
  EXPECT_TRUE((*spool)->ReadAll()->empty());
}

TEST(SpoolTest, TornTailIsIgnoredNotFatal) {
  std::string path = TempPath("torn.log");
  {
    auto spool = Spool::Open(path);
    ASSERT_TRUE((*spool)->Append({Event(0), Event(1), Event(2)}).ok());
  }
  // Simulate a crash during the last write: cut the file inside the last record, and
  // also flip a byte inside it in a second copy.
  FILE* f = std::fopen(path.c_str(), "rb");
  std::string bytes;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) bytes.append(buf, n);
  std::fclose(f);
  for (size_t cut : {bytes.size() - 1, bytes.size() - 20}) {
    std::string torn_path = TempPath("torn2.log");
    FILE* out = std::fopen(torn_path.c_str(), "wb");
    std::fwrite(bytes.data(), 1, cut, out);
    std::fclose(out);
    size_t torn = 0;
    auto events = ReadSpoolFile(torn_path, &torn);
    ASSERT_TRUE(events.ok());
    EXPECT_EQ(events->size(), 2u);
    EXPECT_GT(torn, 0u);
  }
  std::string flipped = bytes;
  flipped[flipped.size() - 3] ^= 0x5a;
  std::string flip_path = TempPath("flip.log");
  FILE* out = std::fopen(flip_path.c_str(), "wb");
  std::fwrite(flipped.data(), 1, flipped.size(), out);
  std::fclose(out);
  EXPECT_EQ(ReadSpoolFile(flip_path)->size(), 2u);
}

TEST(SpoolTest, OneWriterPerSpool) {
  std::string path = TempPath("locked.log");
  auto first = Spool::Open(path);
  ASSERT_TRUE(first.ok());
  auto second = Spool::Open(path);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  first->reset();
  EXPECT_TRUE(Spool::Open(path).ok());
}

}  // namespace
}  // namespace gantry::ledger
