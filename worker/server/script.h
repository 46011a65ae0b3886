// The scripted sampler: a test double, named as such, that forces chosen text through
// the real tokenizer, kernels and session, so that tests of the router and the harness
// drive exact outputs at real cost.
//
// Script file (YAML): a list of rules, first match wins:
//   - match: "weather in Paris"      # substring of the last message of the rendered prompt
//     emit: "<tool_call>\n{\"name\": ...}\n</tool_call>"
//   - match: "weather"
//     tools: false                     # optional: only when the request offers no tools
//     emit: "I cannot look that up."   # (true: only when it offers some)
//   - match: ""                      # an empty match matches everything
//     emit: "Hello."
// No matching rule emits kDefaultScriptText. A rule is tested against the content of
// the conversation's last message (the part of the rendered prompt a test controls).
//
// Thread-safety: immutable after Load().
#ifndef GANTRY_WORKER_SERVER_SCRIPT_H_
#define GANTRY_WORKER_SERVER_SCRIPT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gantry::server {

inline constexpr char kDefaultScriptText[] = "This is the scripted default reply.";

class Script {
 public:
  // Errors: NOT_FOUND; INVALID_ARGUMENT (not a list of {match, emit} string maps),
  // naming the rule.
  static absl::StatusOr<Script> Load(const std::string& path);
  static absl::StatusOr<Script> FromYaml(const std::string& text);

  // The text to emit for a request whose last message is `last_message` and which
  // offers tools (`offers_tools`) or not.
  const std::string& TextFor(const std::string& last_message, bool offers_tools) const;

 private:
  struct Rule {
    std::string match;
    std::string emit;
    int tools = -1;  // -1: any request; 0: only without tools; 1: only with tools
  };
  std::vector<Rule> rules_;
  std::string default_ = kDefaultScriptText;
};

}  // namespace gantry::server

#endif  // GANTRY_WORKER_SERVER_SCRIPT_H_
