// `gantry bundle`: make-test-model (pack and verify land with the bundle manifest).
#ifndef GANTRY_WORKER_BUNDLE_BUNDLE_COMMANDS_H_
#define GANTRY_WORKER_BUNDLE_BUNDLE_COMMANDS_H_

#include "cli/subcommand.h"

namespace gantry::bundle {

extern const cli::Subcommand kBundleCommand;

}  // namespace gantry::bundle

#endif  // GANTRY_WORKER_BUNDLE_BUNDLE_COMMANDS_H_
