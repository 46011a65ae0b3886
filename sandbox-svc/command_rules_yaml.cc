#include "sandbox-svc/command_rules_yaml.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace gantry::sandbox {
namespace {

absl::Status Invalid(absl::string_view what) {
  return Error(absl::StatusCode::kInvalidArgument, "invalid_rules",
               absl::StrCat("command rules: ", what));
}

absl::Status ReadList(const YAML::Node& node, const std::string& where,
                      std::vector<std::string>* out) {
  if (!node) return absl::OkStatus();
  if (!node.IsSequence()) return Invalid(absl::StrCat(where, " must be a list"));
  for (const auto& item : node) {
    if (!item.IsScalar()) return Invalid(absl::StrCat(where, " items must be strings"));
    out->push_back(item.as<std::string>());
  }
  return absl::OkStatus();
}

absl::StatusOr<CommandRules> Parse(absl::string_view text, const SandboxViewResolver& resolver) {
  YAML::Node root = YAML::Load(std::string(text));
  if (!root.IsMap()) return Invalid("the document must be a mapping");
  for (const auto& kv : root) {
    std::string key = kv.first.as<std::string>();
    if (key != "version" && key != "name" && key != "executables") {
      return Invalid(absl::StrCat("unknown key '", key, "'"));
    }
  }
  if (!root["version"] || root["version"].as<std::string>() != "1") {
    return Invalid("version must be 1");
  }
  CommandRules rules;
  if (root["name"]) rules.name = root["name"].as<std::string>();
  const YAML::Node list = root["executables"];
  if (list && !list.IsSequence()) return Invalid("executables must be a list");
  std::set<std::string> ids;
  for (size_t i = 0; list && i < list.size(); ++i) {
    const YAML::Node e = list[i];
    const std::string where = absl::StrCat("executables[", i, "]");
    if (!e.IsMap()) return Invalid(absl::StrCat(where, " must be a mapping"));
    for (const auto& kv : e) {
      std::string key = kv.first.as<std::string>();
      if (key != "id" && key != "path" && key != "subcommands" && key != "denied_flags" &&
          key != "arg_patterns" && key != "allowed_flags" && key != "max_args") {
        return Invalid(absl::StrCat(where, ": unknown key '", key, "'"));
      }
    }
    ExecutableRule rule;
    if (!e["id"] || !e["id"].IsScalar() || e["id"].as<std::string>().empty()) {
      return Invalid(absl::StrCat(where, ": id is required"));
    }
    rule.id = e["id"].as<std::string>();
    if (!ids.insert(rule.id).second) return Invalid(absl::StrCat("duplicate id '", rule.id, "'"));
    if (!e["path"] || !e["path"].IsScalar() ||
        !absl::StartsWith(e["path"].as<std::string>(), "/")) {
      return Invalid(absl::StrCat(where, ": path must be absolute"));
    }
    rule.path = e["path"].as<std::string>();
    auto real = resolver.Resolve(rule.path, "/");
    if (real.ok()) rule.path = *real;
    GANTRY_RETURN_IF_ERROR(ReadList(e["subcommands"], where + ".subcommands", &rule.subcommands));
    GANTRY_RETURN_IF_ERROR(ReadList(e["denied_flags"], where + ".denied_flags", &rule.denied_flags));
    GANTRY_RETURN_IF_ERROR(ReadList(e["arg_patterns"], where + ".arg_patterns", &rule.arg_patterns));
    GANTRY_RETURN_IF_ERROR(
        ReadList(e["allowed_flags"], where + ".allowed_flags", &rule.allowed_flags));
    if (e["max_args"]) {
      if (!e["max_args"].IsScalar()) return Invalid(absl::StrCat(where, ": max_args must be a number"));
      const std::string text = e["max_args"].as<std::string>();
      if (!absl::SimpleAtoi(text, &rule.max_args) || rule.max_args < 0 || rule.max_args > 100000) {
        return Invalid(absl::StrCat(where, ": max_args must be a number from 0 to 100000"));
      }
    }
    rules.executables.push_back(std::move(rule));
  }
  return rules;
}

}  // namespace

absl::StatusOr<CommandRules> ParseCommandRulesYaml(absl::string_view text,
                                                   const SandboxViewResolver& resolver) {
  try {
    return Parse(text, resolver);
  } catch (const std::exception& e) {
    return Invalid(e.what());
  }
}

absl::StatusOr<CommandRules> LoadCommandRulesFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return Error(absl::StatusCode::kNotFound, "invalid_rules",
                 absl::StrCat("cannot read rules file ", path));
  }
  std::stringstream buf;
  buf << in.rdbuf();
  return ParseCommandRulesYaml(buf.str(), SandboxViewResolver(""));
}

}  // namespace gantry::sandbox
