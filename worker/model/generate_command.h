// `gantry generate`: run a GGUF model with Gantry's kernels; the worker's inference
// path without the worker protocol, for agreement tests against llama.cpp and
// benchmarks.
#ifndef GANTRY_WORKER_MODEL_GENERATE_COMMAND_H_
#define GANTRY_WORKER_MODEL_GENERATE_COMMAND_H_

#include "common/subcommand.h"

namespace gantry::model {

extern const Subcommand kGenerateCommand;

}  // namespace gantry::model

#endif  // GANTRY_WORKER_MODEL_GENERATE_COMMAND_H_
