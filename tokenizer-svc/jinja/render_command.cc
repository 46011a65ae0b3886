#include "tokenizer-svc/jinja/render_command.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "tokenizer-svc/jinja/chat_template.h"

namespace gantry::jinja {
namespace {

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "gantry render: %s\n", std::string(status.message()).c_str());
  return 1;
}

int RunRender(const std::vector<std::string>& args) {
  std::string tokenizer, conversation_path;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--tokenizer" && i + 1 < args.size()) {
      tokenizer = args[++i];
    } else if (args[i].rfind("--tokenizer=", 0) == 0) {
      tokenizer = args[i].substr(12);
    } else if (!args[i].empty() && args[i][0] == '-' && args[i] != "-") {
      std::fprintf(stderr, "gantry render: unknown option '%s'\n", args[i].c_str());
      return 2;
    } else if (conversation_path.empty()) {
      conversation_path = args[i];
    } else {
      std::fprintf(stderr, "gantry render: one conversation file only\n");
      return 2;
    }
  }
  if (tokenizer.empty() || conversation_path.empty()) {
    std::fprintf(stderr, "usage: gantry render --tokenizer PATH CONVERSATION.json\n");
    return 2;
  }
  absl::StatusOr<ChatTemplate> tpl = ChatTemplate::Load(tokenizer);
  if (!tpl.ok()) return Fail(tpl.status());
  std::stringstream text;
  if (conversation_path == "-") {
    text << std::cin.rdbuf();
  } else {
    std::ifstream in(conversation_path, std::ios::binary);
    if (!in) return Fail(absl::NotFoundError("cannot read " + conversation_path));
    text << in.rdbuf();
  }
  absl::StatusOr<json::Value> conversation = json::Parse(text.str());
  if (!conversation.ok()) return Fail(conversation.status());
  absl::StatusOr<std::string> prompt = tpl->Render(*conversation);
  if (!prompt.ok()) return Fail(prompt.status());
  std::fwrite(prompt->data(), 1, prompt->size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace

const Subcommand kRenderCommand = {
    "render", "render a conversation with a model's chat template",
    "Usage: gantry render --tokenizer PATH CONVERSATION.json\n\n"
    "Prints the prompt the chat template in PATH/tokenizer_config.json renders for the\n"
    "conversation, exactly as Hugging Face's apply_chat_template would (no newline is\n"
    "added). CONVERSATION.json: {\"messages\": [...], \"tools\": [...],\n"
    "\"add_generation_prompt\": true, ...}; other keys become template variables; '-'\n"
    "reads standard input.\n"
    "  --tokenizer PATH   a directory with tokenizer_config.json, or the file itself\n"
    "Exit status: 0 rendered; 1 the template failed (message and template line on\n"
    "stderr) or a file could not be read; 2 usage error.\n",
    &RunRender};

}  // namespace gantry::jinja
