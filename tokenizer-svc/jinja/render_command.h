// `gantry render --tokenizer PATH CONVERSATION.json`: prints the prompt a model's chat
// template renders for a conversation, exactly (no trailing newline added).
//
// PATH is a directory holding tokenizer_config.json (or the file itself); the
// conversation format is chat_template.h's. Exit status: 0 rendered, 1 the template or
// the files failed (the message, with the template line, on stderr), 2 usage error.
#ifndef GANTRY_TOKENIZER_SVC_JINJA_RENDER_COMMAND_H_
#define GANTRY_TOKENIZER_SVC_JINJA_RENDER_COMMAND_H_

#include "common/subcommand.h"

namespace gantry::jinja {

extern const Subcommand kRenderCommand;

}  // namespace gantry::jinja

#endif  // GANTRY_TOKENIZER_SVC_JINJA_RENDER_COMMAND_H_
