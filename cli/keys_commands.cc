#include "cli/keys_commands.h"

#include <cstdio>
#include <string>
#include <vector>

#include "common/curve_keys.h"
#include "common/status.h"

namespace gantry::cli {
namespace {

int Fail(const absl::Status& status) {
  std::string reason = ReasonOf(status);
  std::fprintf(stderr, "gantry keys: %s%s%s\n", reason.empty() ? "" : reason.c_str(),
               reason.empty() ? "" : ": ", std::string(status.message()).c_str());
  return 1;
}

int GenCurve(const std::vector<std::string>& args) {
  if (args.size() != 3 || args[1] != "--out" || args[2].empty()) {
    std::fprintf(stderr, "gantry keys gen-curve: usage: gantry keys gen-curve --out PREFIX\n");
    return 2;
  }
  auto pair = GenerateCurveKeyPair();
  if (!pair.ok()) return Fail(pair.status());
  absl::Status written = WriteCurveKeyPair(args[2], *pair);
  if (!written.ok()) return Fail(written);
  std::printf("%s.key (secret, mode 0600)\n%s.pub %s fingerprint %s\n", args[2].c_str(),
              args[2].c_str(), pair->public_z85.c_str(),
              CurveKeyFingerprint(*DecodeCurveKeyZ85(pair->public_z85)).c_str());
  return 0;
}

int Fingerprint(const std::vector<std::string>& args) {
  if (args.size() != 2) {
    std::fprintf(stderr, "gantry keys fingerprint: usage: gantry keys fingerprint FILE.pub\n");
    return 2;
  }
  auto key = ReadCurvePublicKeyFile(args[1]);
  if (!key.ok()) return Fail(key.status());
  std::printf("%s\n", CurveKeyFingerprint(*DecodeCurveKeyZ85(*key)).c_str());
  return 0;
}

int RunKeys(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "gen-curve") return GenCurve(args);
  if (!args.empty() && args[0] == "fingerprint") return Fingerprint(args);
  std::fprintf(stderr, "gantry keys: expected gen-curve or fingerprint (see gantry keys --help)\n");
  return 2;
}

}  // namespace

const Subcommand kKeysCommand = {
    "keys", "make CURVE key pairs for routers and workers on other hosts",
    "Usage: gantry keys gen-curve --out PREFIX\n"
    "       gantry keys fingerprint FILE.pub\n\n"
    "gen-curve writes a new Curve25519 key pair in ZeroMQ's Z85 text form: PREFIX.key\n"
    "(the secret key, mode 0600; never copy it off its host) and PREFIX.pub (the public\n"
    "key). It never overwrites an existing file. The router's .pub goes to every worker\n"
    "(--router-key); each worker's .pub goes into the router's allow-list (--worker-keys,\n"
    "one key per line, '#' comments).\n"
    "fingerprint prints the short name the router's logs use for a public key.\n"
    "Exit status: 0 done, 1 failed (the reason is printed), 2 usage error.\n",
    &RunKeys};

}  // namespace gantry::cli
