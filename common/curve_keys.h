// CURVE key files and worker allow-lists (docs/protocol.md, "CURVE and ZAP").
//
// Keys are Curve25519 keys in ZeroMQ's Z85 text form (ZeroMQ RFC 32): 40 characters for
// 32 bytes. The files are outside bytes (an admin writes them, another host may have
// produced them), so parsing is strict and every failure is INVALID_ARGUMENT with the
// reason `invalid_key_file` and a message naming the line:
//
//   - at most kMaxKeyFileBytes bytes;
//   - lines end with "\n"; spaces, tabs and one "\r" around a line are ignored;
//   - empty lines and lines whose first other character is '#' are comments ('#' is a
//     Z85 character, but no key starts with it: that group would exceed 32 bits);
//   - every other line is exactly one key: 40 characters of the Z85 alphabet whose
//     5-character groups each decode to at most 2^32 - 1;
//   - a key file (PREFIX.key, PREFIX.pub) holds exactly one key; an allow-list holds one
//     or more (duplicates are folded).
//
// A secret key file must not be readable or writable by group or others (mode 0600, as
// `gantry keys gen-curve` writes it); one that is is refused.
//
// Thread-safety: all functions are thread-safe.
#ifndef GANTRY_COMMON_CURVE_KEYS_H_
#define GANTRY_COMMON_CURVE_KEYS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gantry {

inline constexpr size_t kCurveKeyBytes = 32;
inline constexpr size_t kCurveKeyZ85Chars = 40;
inline constexpr size_t kMaxKeyFileBytes = size_t{64} << 10;

struct CurveKeyPair {
  std::string public_z85;  // 40 characters
  std::string secret_z85;  // 40 characters
};

// Whether the linked libzmq was built with CURVE (libsodium or tweetnacl).
bool CurveSupported();

// A fresh key pair from libzmq's CSPRNG-backed generator.
// Errors: UNIMPLEMENTED when libzmq has no CURVE support.
absl::StatusOr<CurveKeyPair> GenerateCurveKeyPair();

// The public key that belongs to `secret_z85` (a key accepted by ParseCurveKeyText).
// Errors: INVALID_ARGUMENT invalid_key_file (not a Z85 key), UNIMPLEMENTED (no CURVE).
absl::StatusOr<std::string> CurvePublicKeyOf(const std::string& secret_z85);

// Z85 -> 32 bytes. Errors: INVALID_ARGUMENT invalid_key_file naming the problem.
absl::StatusOr<std::string> DecodeCurveKeyZ85(absl::string_view z85);
// 32 bytes -> Z85. Precondition: bytes.size() == kCurveKeyBytes (else returns "").
std::string EncodeCurveKeyZ85(absl::string_view bytes);

// A short, non-secret name for a public key, for logs and metrics: the first 16 hex
// digits of SHA-256 over the key's 32 bytes. Never call it on a secret key.
std::string CurveKeyFingerprint(absl::string_view key_bytes);

// The one key of a key file's text, in Z85. Errors: invalid_key_file.
absl::StatusOr<std::string> ParseCurveKeyText(absl::string_view text);

// The keys of an allow-list's text, in Z85, sorted and without duplicates.
// Errors: invalid_key_file (also when the list holds no key).
absl::StatusOr<std::vector<std::string>> ParseCurveAllowList(absl::string_view text);

// The same over files. Errors: as above with the path in the message; NOT_FOUND when
// the file cannot be read; ReadCurveSecretKeyFile also fails with invalid_key_file when
// group or others may access the file.
absl::StatusOr<std::string> ReadCurveSecretKeyFile(const std::string& path);
absl::StatusOr<std::string> ReadCurvePublicKeyFile(const std::string& path);
absl::StatusOr<std::vector<std::string>> ReadCurveAllowListFile(const std::string& path);

// A CURVE client's keys: its own pair and the server's public key, all Z85.
struct CurveClientKeys {
  std::string public_z85;
  std::string secret_z85;
  std::string server_public_z85;
};

// Reads a client's keys: its secret key file (the public key is derived from it) and
// the server's public key file. Errors: as ReadCurveSecretKeyFile / ReadCurvePublicKeyFile.
absl::StatusOr<CurveClientKeys> ReadCurveClientKeys(const std::string& secret_key_path,
                                                    const std::string& server_key_path);

// Makes the libzmq socket `zmq_socket` (a handle from zmq_socket / socket_t::handle(),
// not yet connected) a CURVE client with `keys`.
// Errors: INVALID_ARGUMENT invalid_key_file (a key does not decode), INTERNAL when
// libzmq refuses an option (UNIMPLEMENTED without CURVE support).
absl::Status ConfigureCurveClient(void* zmq_socket, const CurveClientKeys& keys);

// Writes PREFIX.key (the secret key, created with mode 0600) and PREFIX.pub (the public
// key, mode 0644), each a comment line and the key. Never overwrites: fails with
// ALREADY_EXISTS when either file exists. Other errors: INTERNAL naming the path.
absl::Status WriteCurveKeyPair(const std::string& prefix, const CurveKeyPair& pair);

}  // namespace gantry

#endif  // GANTRY_COMMON_CURVE_KEYS_H_
