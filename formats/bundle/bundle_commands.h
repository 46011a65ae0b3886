// `gantry bundle`: pack, verify (docs/bundle.md) and make-test-model.
#ifndef GANTRY_FORMATS_BUNDLE_BUNDLE_COMMANDS_H_
#define GANTRY_FORMATS_BUNDLE_BUNDLE_COMMANDS_H_

#include "common/subcommand.h"

namespace gantry::bundle {

extern const Subcommand kBundleCommand;

}  // namespace gantry::bundle

#endif  // GANTRY_FORMATS_BUNDLE_BUNDLE_COMMANDS_H_
