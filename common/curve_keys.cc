#include "common/curve_keys.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include <zmq.h>

#include "absl/strings/str_cat.h"
#include "common/error_codes.h"
#include "common/file.h"
#include "common/sha256.h"

namespace gantry {
namespace {

constexpr char kZ85Alphabet[] =
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

// Index of `c` in the Z85 alphabet, or -1.
int Z85Index(char c) {
  const char* hit = std::strchr(kZ85Alphabet, c);
  return (c == '\0' || hit == nullptr) ? -1 : static_cast<int>(hit - kZ85Alphabet);
}

bool IsZ85Line(absl::string_view line) {
  if (line.size() != kCurveKeyZ85Chars) return false;
  return std::all_of(line.begin(), line.end(), [](char c) { return Z85Index(c) >= 0; });
}

absl::Status KeyFileError(absl::string_view message) {
  return ReasonError("invalid_key_file", message);
}

absl::string_view Trim(absl::string_view s) {
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
  return s;
}

// Every key line of `text`, validated, in order. Comments and blank lines are skipped.
absl::StatusOr<std::vector<std::string>> KeyLines(absl::string_view text) {
  if (text.size() > kMaxKeyFileBytes) {
    return KeyFileError(absl::StrCat("larger than ", kMaxKeyFileBytes, " bytes"));
  }
  std::vector<std::string> keys;
  size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    size_t end = text.find('\n');
    absl::string_view raw = text.substr(0, end);
    text.remove_prefix(end == absl::string_view::npos ? text.size() : end + 1);
    absl::string_view line = Trim(raw);
    // '#' is a Z85 character, but no key starts with it: a group starting with '#' (84)
    // exceeds 32 bits. So a '#' line is always a comment.
    if (line.empty() || line.front() == '#') continue;
    if (IsZ85Line(line)) {
      auto decoded = DecodeCurveKeyZ85(line);
      if (!decoded.ok()) {
        return KeyFileError(absl::StrCat("line ", line_no, ": ", decoded.status().message()));
      }
      keys.emplace_back(line);
      continue;
    }
    return KeyFileError(absl::StrCat("line ", line_no, ": expected a 40-character Z85 key or a "
                                     "'#' comment, found ", line.size(), " characters"));
  }
  return keys;
}

absl::Status WithPath(const std::string& path, const absl::Status& status) {
  if (status.ok()) return status;
  if (status.code() == absl::StatusCode::kNotFound) return status;
  return KeyFileError(absl::StrCat(path, ": ", status.message()));
}

absl::StatusOr<std::string> ReadKeyFile(const std::string& path) {
  auto text = ReadFileToString(path, kMaxKeyFileBytes);
  if (!text.ok()) return WithPath(path, text.status());
  auto key = ParseCurveKeyText(*text);
  if (!key.ok()) return WithPath(path, key.status());
  return key;
}

absl::Status WriteNewFile(const std::string& path, const std::string& text, mode_t mode) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) {
    if (errno == EEXIST) return absl::AlreadyExistsError(absl::StrCat(path, " exists"));
    return absl::InternalError(absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  }
  // The umask may have narrowed `mode`; it must not have widened it, and 0600 stays 0600.
  bool ok = fchmod(fd, mode) == 0 &&
            write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
            fsync(fd) == 0;
  ok = (close(fd) == 0) && ok;
  if (!ok) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace

bool CurveSupported() { return zmq_has("curve") != 0; }

absl::StatusOr<CurveKeyPair> GenerateCurveKeyPair() {
  char public_key[kCurveKeyZ85Chars + 1], secret_key[kCurveKeyZ85Chars + 1];
  if (!CurveSupported() || zmq_curve_keypair(public_key, secret_key) != 0) {
    return absl::UnimplementedError("this libzmq was built without CURVE support");
  }
  CurveKeyPair pair{std::string(public_key, kCurveKeyZ85Chars),
                    std::string(secret_key, kCurveKeyZ85Chars)};
  std::memset(secret_key, 0, sizeof(secret_key));
  return pair;
}

absl::StatusOr<std::string> CurvePublicKeyOf(const std::string& secret_z85) {
  auto decoded = DecodeCurveKeyZ85(secret_z85);
  if (!decoded.ok()) return decoded.status();
  char public_key[kCurveKeyZ85Chars + 1];
  if (!CurveSupported() || zmq_curve_public(public_key, secret_z85.c_str()) != 0) {
    return absl::UnimplementedError("this libzmq was built without CURVE support");
  }
  return std::string(public_key, kCurveKeyZ85Chars);
}

absl::StatusOr<std::string> DecodeCurveKeyZ85(absl::string_view z85) {
  if (z85.size() != kCurveKeyZ85Chars) {
    return KeyFileError(absl::StrCat("a key is ", kCurveKeyZ85Chars, " Z85 characters, not ",
                                     z85.size()));
  }
  std::string out;
  out.reserve(kCurveKeyBytes);
  for (size_t group = 0; group < z85.size(); group += 5) {
    uint64_t value = 0;
    for (size_t i = group; i < group + 5; ++i) {
      int digit = Z85Index(z85[i]);
      if (digit < 0) {
        return KeyFileError(absl::StrCat("character ", i + 1, " is not in the Z85 alphabet"));
      }
      value = value * 85 + static_cast<uint64_t>(digit);
    }
    if (value > 0xffffffffu) {
      return KeyFileError(absl::StrCat("characters ", group + 1, "-", group + 5,
                                       " do not decode to 32 bits"));
    }
    for (int shift = 24; shift >= 0; shift -= 8) {
      out.push_back(static_cast<char>((value >> shift) & 0xff));
    }
  }
  return out;
}

std::string EncodeCurveKeyZ85(absl::string_view bytes) {
  if (bytes.size() != kCurveKeyBytes) return "";
  std::string out;
  out.reserve(kCurveKeyZ85Chars);
  for (size_t group = 0; group < bytes.size(); group += 4) {
    uint32_t value = 0;
    for (size_t i = group; i < group + 4; ++i) {
      value = (value << 8) | static_cast<unsigned char>(bytes[i]);
    }
    char digits[5];
    for (int i = 4; i >= 0; --i) {
      digits[i] = kZ85Alphabet[value % 85];
      value /= 85;
    }
    out.append(digits, 5);
  }
  return out;
}

std::string CurveKeyFingerprint(absl::string_view key_bytes) {
  return Sha256Hex(key_bytes).substr(0, 16);
}

absl::StatusOr<std::string> ParseCurveKeyText(absl::string_view text) {
  auto keys = KeyLines(text);
  if (!keys.ok()) return keys.status();
  if (keys->size() != 1) {
    return KeyFileError(absl::StrCat("a key file holds exactly one key, found ", keys->size()));
  }
  return std::move(keys->front());
}

absl::StatusOr<std::vector<std::string>> ParseCurveAllowList(absl::string_view text) {
  auto keys = KeyLines(text);
  if (!keys.ok()) return keys.status();
  if (keys->empty()) return KeyFileError("the allow-list holds no key");
  std::sort(keys->begin(), keys->end());
  keys->erase(std::unique(keys->begin(), keys->end()), keys->end());
  return keys;
}

absl::StatusOr<std::string> ReadCurveSecretKeyFile(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return KeyFileError(absl::StrCat(path, ": mode ", mode, " lets group or others access "
                                     "the secret key (chmod 600)"));
  }
  return ReadKeyFile(path);
}

absl::StatusOr<std::string> ReadCurvePublicKeyFile(const std::string& path) {
  return ReadKeyFile(path);
}

absl::StatusOr<std::vector<std::string>> ReadCurveAllowListFile(const std::string& path) {
  auto text = ReadFileToString(path, kMaxKeyFileBytes);
  if (!text.ok()) return WithPath(path, text.status());
  auto keys = ParseCurveAllowList(*text);
  if (!keys.ok()) return WithPath(path, keys.status());
  return keys;
}

absl::StatusOr<CurveClientKeys> ReadCurveClientKeys(const std::string& secret_key_path,
                                                    const std::string& server_key_path) {
  CurveClientKeys keys;
  auto secret = ReadCurveSecretKeyFile(secret_key_path);
  if (!secret.ok()) return secret.status();
  keys.secret_z85 = std::move(*secret);
  auto public_key = CurvePublicKeyOf(keys.secret_z85);
  if (!public_key.ok()) return public_key.status();
  keys.public_z85 = std::move(*public_key);
  auto server = ReadCurvePublicKeyFile(server_key_path);
  if (!server.ok()) return server.status();
  keys.server_public_z85 = std::move(*server);
  return keys;
}

absl::Status ConfigureCurveClient(void* zmq_socket, const CurveClientKeys& keys) {
  if (!CurveSupported()) {
    return absl::UnimplementedError("this libzmq was built without CURVE support");
  }
  const std::pair<int, const std::string*> options[] = {
      {ZMQ_CURVE_SERVERKEY, &keys.server_public_z85},
      {ZMQ_CURVE_PUBLICKEY, &keys.public_z85},
      {ZMQ_CURVE_SECRETKEY, &keys.secret_z85},
  };
  for (const auto& [option, z85] : options) {
    auto bytes = DecodeCurveKeyZ85(*z85);
    if (!bytes.ok()) return bytes.status();
    if (zmq_setsockopt(zmq_socket, option, bytes->data(), bytes->size()) != 0) {
      return absl::InternalError(
          absl::StrCat("zmq_setsockopt(CURVE): ", zmq_strerror(zmq_errno())));
    }
  }
  return absl::OkStatus();
}

absl::Status WriteCurveKeyPair(const std::string& prefix, const CurveKeyPair& pair) {
  auto public_bytes = DecodeCurveKeyZ85(pair.public_z85);
  if (!public_bytes.ok()) return public_bytes.status();
  if (auto secret = DecodeCurveKeyZ85(pair.secret_z85); !secret.ok()) return secret.status();
  const std::string secret_path = prefix + ".key", public_path = prefix + ".pub";
  for (const auto& path : {secret_path, public_path}) {
    if (access(path.c_str(), F_OK) == 0) {
      return absl::AlreadyExistsError(absl::StrCat(path, " exists"));
    }
  }
  absl::Status status = WriteNewFile(
      secret_path,
      absl::StrCat("# gantry CURVE secret key (Z85). Keep it on this host, mode 0600.\n",
                   pair.secret_z85, "\n"),
      0600);
  if (!status.ok()) return status;
  return WriteNewFile(
      public_path,
      absl::StrCat("# gantry CURVE public key (Z85), fingerprint ",
                   CurveKeyFingerprint(*public_bytes), "\n",
                   pair.public_z85, "\n"),
      0644);
}

}  // namespace gantry
