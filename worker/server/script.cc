#include "worker/server/script.h"

#include <yaml-cpp/yaml.h>


#include "absl/strings/str_cat.h"
#include "common/file.h"
#include "common/status.h"

namespace gantry::server {

absl::StatusOr<Script> Script::Load(const std::string& path) {
  GANTRY_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  auto script = FromYaml(text);
  if (!script.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", script.status().message()));
  }
  return script;
}

absl::StatusOr<Script> Script::FromYaml(const std::string& text) {
  Script script;
  try {
    YAML::Node root = YAML::Load(text);
    if (!root.IsSequence()) return absl::InvalidArgumentError("a script is a list of {match, emit} rules");
    for (size_t i = 0; i < root.size(); ++i) {
      const YAML::Node& rule = root[i];
      const bool has_tools = rule.IsMap() && rule["tools"];
      if (!rule.IsMap() || !rule["match"] || !rule["emit"] || rule.size() != (has_tools ? 3u : 2u) ||
          !rule["match"].IsScalar() || !rule["emit"].IsScalar() ||
          (has_tools && !rule["tools"].IsScalar())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "rule ", i, ": expected the string keys match and emit, and optionally tools"));
      }
      Rule r{rule["match"].as<std::string>(), rule["emit"].as<std::string>()};
      if (has_tools) {
        const std::string t = rule["tools"].as<std::string>();
        if (t != "true" && t != "false") {
          return absl::InvalidArgumentError(absl::StrCat("rule ", i, ": tools: expected true or false"));
        }
        r.tools = t == "true" ? 1 : 0;
      }
      script.rules_.push_back(std::move(r));
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("script YAML: ", e.what()));
  }
  return script;
}

const std::string& Script::TextFor(const std::string& last_message, bool offers_tools) const {
  for (const Rule& rule : rules_) {
    if (rule.tools >= 0 && (rule.tools == 1) != offers_tools) continue;
    if (last_message.find(rule.match) != std::string::npos) return rule.emit;
  }
  return default_;
}

}  // namespace gantry::server
