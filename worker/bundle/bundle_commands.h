// `gantry bundle`: pack, verify (docs/bundle.md) and make-test-model.
#ifndef GANTRY_WORKER_BUNDLE_BUNDLE_COMMANDS_H_
#define GANTRY_WORKER_BUNDLE_BUNDLE_COMMANDS_H_

#include "cli/subcommand.h"

namespace gantry::bundle {

extern const cli::Subcommand kBundleCommand;

}  // namespace gantry::bundle

#endif  // GANTRY_WORKER_BUNDLE_BUNDLE_COMMANDS_H_
