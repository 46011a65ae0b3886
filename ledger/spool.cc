#include "ledger/spool.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/sha256.h"

namespace gantry::ledger {
namespace {

absl::Status OsError(absl::string_view what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

// First 8 bytes of SHA-256(body), raw.
std::string Checksum(const std::string& body) {
  return absl::HexStringToBytes(Sha256Hex(body)).substr(0, 8);
}

absl::StatusOr<std::vector<v1::LedgerEvent>> Decode(const std::string& data, size_t* torn) {
  std::vector<v1::LedgerEvent> events;
  size_t pos = 0;
  while (pos < data.size()) {
    if (data.size() - pos < 12) break;
    uint32_t length = 0;
    for (int i = 3; i >= 0; --i) length = (length << 8) | static_cast<unsigned char>(data[pos + i]);
    if (data.size() - pos - 12 < length) break;
    std::string body = data.substr(pos + 12, length);
    if (data.compare(pos + 4, 8, Checksum(body)) != 0) break;
    v1::LedgerEvent event;
    if (!event.ParseFromString(body)) break;
    events.push_back(std::move(event));
    pos += 12 + length;
  }
  if (torn) *torn = data.size() - pos;
  return events;
}

absl::StatusOr<std::string> ReadFd(int fd, const std::string& path) {
  std::string data;
  char buf[1 << 16];
  off_t offset = 0;
  for (;;) {
    ssize_t n = ::pread(fd, buf, sizeof(buf), offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      return OsError("read", path);
    }
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
    offset += n;
  }
  return data;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Spool>> Spool::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return OsError("open", path);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("spool ", path, " is locked by another writer"));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return OsError("stat", path);
  }
  return std::unique_ptr<Spool>(new Spool(path, fd, static_cast<size_t>(st.st_size)));
}

Spool::~Spool() { ::close(fd_); }

absl::Status Spool::Append(const std::vector<v1::LedgerEvent>& events) {
  std::string bytes;
  for (const auto& event : events) {
    std::string body = event.SerializeAsString();
    uint32_t length = static_cast<uint32_t>(body.size());
    for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>((length >> (8 * i)) & 0xFF));
    bytes += Checksum(body);
    bytes += body;
  }
  absl::Status written = WriteFully(fd_, bytes, path_);
  if (!written.ok()) return written;
  if (::fdatasync(fd_) != 0) return OsError("fdatasync", path_);
  size_ += bytes.size();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::LedgerEvent>> Spool::ReadAll(size_t* torn_bytes) const {
  auto data = ReadFd(fd_, path_);
  if (!data.ok()) return data.status();
  return Decode(*data, torn_bytes);
}

absl::StatusOr<std::vector<v1::LedgerEvent>> Spool::ReadFrom(size_t offset, size_t max_events,
                                                              size_t* next_offset) const {
  std::vector<v1::LedgerEvent> events;
  while (events.size() < max_events) {
    char header[12];
    ssize_t n = ::pread(fd_, header, sizeof(header), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return OsError("read", path_);
    if (n < static_cast<ssize_t>(sizeof(header))) break;
    uint32_t length = 0;
    for (int i = 3; i >= 0; --i) length = (length << 8) | static_cast<unsigned char>(header[i]);
    std::string body(length, '\0');
    ssize_t got = ::pread(fd_, body.data(), length, static_cast<off_t>(offset + 12));
    if (got < 0) return OsError("read", path_);
    if (static_cast<uint32_t>(got) < length) break;
    if (std::string(header + 4, 8) != Checksum(body)) break;
    v1::LedgerEvent event;
    if (!event.ParseFromString(body)) break;
    events.push_back(std::move(event));
    offset += 12 + length;
  }
  *next_offset = offset;
  return events;
}

absl::Status Spool::Clear() {
  if (::ftruncate(fd_, 0) != 0) return OsError("truncate", path_);
  if (::fdatasync(fd_) != 0) return OsError("fdatasync", path_);
  size_ = 0;
  return absl::OkStatus();
}

absl::Status WriteFully(int fd, const std::string& bytes, const std::string& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return OsError("write", path);
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::LedgerEvent>> ReadSpoolFile(const std::string& path,
                                                           size_t* torn_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return OsError("open", path);
  auto data = ReadFd(fd, path);
  ::close(fd);
  if (!data.ok()) return data.status();
  return Decode(*data, torn_bytes);
}

}  // namespace gantry::ledger
