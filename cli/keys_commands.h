// `gantry keys`: CURVE key pairs for routers and workers on other hosts
// (docs/router.md, "Workers on other hosts").
//   gantry keys gen-curve --out PREFIX   writes PREFIX.key (secret, 0600) and PREFIX.pub
//   gantry keys fingerprint FILE         the fingerprint logs show for a public key
#ifndef GANTRY_CLI_KEYS_COMMANDS_H_
#define GANTRY_CLI_KEYS_COMMANDS_H_

#include "common/subcommand.h"

namespace gantry::cli {

extern const Subcommand kKeysCommand;

}  // namespace gantry::cli

#endif  // GANTRY_CLI_KEYS_COMMANDS_H_
