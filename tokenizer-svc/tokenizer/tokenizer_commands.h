// The `gantry tokenize` and `gantry detokenize` subcommands (see their usage text in
// tokenizer_commands.cc). Exit status: 0 success, 1 failure (load or encode error,
// unreadable input), 2 usage error.
#ifndef GANTRY_TOKENIZER_SVC_TOKENIZER_TOKENIZER_COMMANDS_H_
#define GANTRY_TOKENIZER_SVC_TOKENIZER_TOKENIZER_COMMANDS_H_

#include "common/subcommand.h"

namespace gantry::tokenizer {

extern const Subcommand kTokenizeCommand;
extern const Subcommand kDetokenizeCommand;

}  // namespace gantry::tokenizer

#endif  // GANTRY_TOKENIZER_SVC_TOKENIZER_TOKENIZER_COMMANDS_H_
