#include "ledger/ledger_key.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file.h"
#include "common/json.h"
#include "common/status.h"
#include "ledger/event_hash.h"
#include "ledger/spool.h"

namespace gantry::ledger {
namespace {

void AppendField(absl::string_view bytes, std::string* out) {
  absl::StrAppend(out, bytes.size(), ":", bytes, "\n");
}

absl::Status OsError(absl::string_view what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

std::string CheckpointMessage(const Checkpoint& c) {
  std::string m = "gantry.ledger.checkpoint.v1\n";
  AppendField(c.writer_id, &m);
  AppendField(absl::StrCat(c.events), &m);
  AppendField(c.head_mac, &m);
  AppendField(absl::StrCat(c.ts_unix_us), &m);
  return m;
}

bool IsLowerHex(absl::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

void Walk(const std::string& dir, int depth, absl::string_view prefix, absl::string_view suffix,
          bool nonempty, std::vector<std::string>* out) {
  if (depth > 8) return;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* entry = ::readdir(d)) {
    std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    std::string path = absl::StrCat(dir, "/", name);
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      Walk(path, depth + 1, prefix, suffix, nonempty, out);
    } else if (S_ISREG(st.st_mode) && absl::StartsWith(name, prefix) &&
               absl::EndsWith(name, suffix) && (!nonempty || st.st_size > 0)) {
      out->push_back(path);
    }
  }
  ::closedir(d);
}

}  // namespace

std::string DefaultKeyFile() {
  if (const char* key = std::getenv("GANTRY_LEDGER_KEY"); key != nullptr && *key) return key;
  std::string home;
  if (const char* h = std::getenv("GANTRY_HOME"); h != nullptr && *h) {
    home = h;
  } else if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg != nullptr && *xdg) {
    home = absl::StrCat(xdg, "/gantry");
  } else {
    const char* user_home = std::getenv("HOME");
    home = absl::StrCat(user_home ? user_home : "", "/.local/share/gantry");
  }
  return absl::StrCat(home, "/ledger.key");
}

absl::StatusOr<std::string> ReadKeyFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    return Error(absl::StatusCode::kNotFound, "ledger_key_missing",
                 absl::StrCat("ledger key ", path, ": ", std::strerror(errno),
                              " (gantry ledger setup makes it)"));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error(absl::StatusCode::kInvalidArgument, "ledger_key_invalid",
                 absl::StrCat("ledger key ", path, " is not a regular file"));
  }
  if ((st.st_mode & 077) != 0) {
    ::close(fd);
    return Error(absl::StatusCode::kPermissionDenied, "ledger_key_exposed",
                 absl::StrCat("ledger key ", path, " is readable by group or others (chmod 600)"));
  }
  char buf[256];
  ssize_t n = ::read(fd, buf, sizeof(buf));
  ::close(fd);
  std::string text(buf, n > 0 ? static_cast<size_t>(n) : 0);
  absl::string_view hex = absl::StripTrailingAsciiWhitespace(text);
  if (hex.size() != 64 || !IsLowerHex(hex)) {
    return Error(absl::StatusCode::kInvalidArgument, "ledger_key_invalid",
                 absl::StrCat("ledger key ", path, ": expected 64 lowercase hex digits"));
  }
  return absl::HexStringToBytes(hex);
}

absl::Status GenerateKeyFile(const std::string& path) {
  unsigned char key[32];
  if (RAND_bytes(key, sizeof(key)) != 1) return absl::InternalError("RAND_bytes failed");
  std::string text =
      absl::StrCat(absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(key), 32)), "\n");
  OPENSSL_cleanse(key, sizeof(key));
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return absl::AlreadyExistsError(absl::StrCat(path, " exists"));
    return OsError("create", path);
  }
  absl::Status written = WriteFully(fd, text, path);
  if (written.ok() && ::fsync(fd) != 0) written = OsError("fsync", path);
  ::close(fd);
  if (!written.ok()) ::unlink(path.c_str());
  return written;
}

std::string HmacSha256Hex(absl::string_view key, absl::string_view data) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac, &length);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(mac), length));
}

std::string EventMac(absl::string_view key, const v1::LedgerEvent& event) {
  std::string m = "gantry.ledger.mac.v1\n";
  m += CanonicalEncoding(event);
  AppendField(event.writer_id(), &m);
  AppendField(absl::StrCat(event.writer_seq()), &m);
  AppendField(event.prev_mac(), &m);
  return HmacSha256Hex(key, m);
}

bool MacEqual(absl::string_view a, absl::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string CheckpointFileName(const std::string& writer_id) {
  return absl::StrCat("checkpoint-", writer_id, ".json");
}

absl::Status WriteCheckpoint(const std::string& dir, absl::string_view key,
                             const Checkpoint& checkpoint) {
  json::Value doc = json::Value::EmptyObject();
  doc.Set("format", json::Value::String("gantry.ledger.checkpoint.v1"));
  doc.Set("writer_id", json::Value::String(checkpoint.writer_id));
  doc.Set("events", json::Value::Int(static_cast<int64_t>(checkpoint.events)));
  doc.Set("head_mac", json::Value::String(checkpoint.head_mac));
  doc.Set("ts_unix_us", json::Value::Int(checkpoint.ts_unix_us));
  doc.Set("hmac", json::Value::String(HmacSha256Hex(key, CheckpointMessage(checkpoint))));
  const std::string text = json::DumpCompact(doc) + "\n";
  const std::string path = absl::StrCat(dir, "/", CheckpointFileName(checkpoint.writer_id));
  const std::string tmp = absl::StrCat(path, ".tmp");
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return OsError("create", tmp);
  absl::Status written = WriteFully(fd, text, tmp);
  if (written.ok() && ::fdatasync(fd) != 0) written = OsError("fdatasync", tmp);
  ::close(fd);
  if (written.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) written = OsError("rename", path);
  if (!written.ok()) {
    ::unlink(tmp.c_str());
    return written;
  }
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return OsError("open", dir);
  const bool synced = ::fsync(dfd) == 0;
  ::close(dfd);
  if (!synced) return OsError("fsync", dir);
  return absl::OkStatus();
}

absl::StatusOr<Checkpoint> ReadCheckpoint(const std::string& path, absl::string_view key) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  auto forged = [&](absl::string_view why) {
    return Error(absl::StatusCode::kDataLoss, "checkpoint_forged",
                 absl::StrCat("checkpoint ", path, ": ", why));
  };
  auto doc = json::Parse(*text);
  if (!doc.ok() || !doc->is_object()) return forged("not a JSON object");
  const json::Value* format = doc->Find("format");
  const json::Value* writer = doc->Find("writer_id");
  const json::Value* events = doc->Find("events");
  const json::Value* head = doc->Find("head_mac");
  const json::Value* ts = doc->Find("ts_unix_us");
  const json::Value* hmac = doc->Find("hmac");
  if (format == nullptr || !format->is_string() ||
      format->as_string() != "gantry.ledger.checkpoint.v1" || writer == nullptr ||
      !writer->is_string() || events == nullptr || !events->as_int64().has_value() ||
      *events->as_int64() < 0 || head == nullptr || !head->is_string() || ts == nullptr ||
      !ts->as_int64().has_value() || hmac == nullptr || !hmac->is_string()) {
    return forged("malformed");
  }
  Checkpoint c;
  c.writer_id = writer->as_string();
  c.events = static_cast<uint64_t>(*events->as_int64());
  c.head_mac = head->as_string();
  c.ts_unix_us = *ts->as_int64();
  if (!MacEqual(HmacSha256Hex(key, CheckpointMessage(c)), hmac->as_string())) {
    return forged("hmac does not match (not written with this ledger key)");
  }
  return c;
}

std::vector<std::string> FindCheckpointFiles(const std::string& dir) {
  std::vector<std::string> out;
  Walk(dir, 0, "checkpoint-", ".json", false, &out);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> FindDeadLetterFiles(const std::string& dir) {
  std::vector<std::string> out;
  Walk(dir, 0, "dead-", ".log", true, &out);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace gantry::ledger
