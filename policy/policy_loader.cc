#include "policy/policy_loader.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <exception>
#include <fstream>
#include <sstream>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json.h"
#include "common/sha256.h"
#include "common/status.h"
#include "policy/path_glob.h"
#include "policy/policy_compile.h"
#include "policy/policy_decide.h"
#include "policy/yaml_reader.h"

namespace gantry::policy {
namespace {

constexpr int64_t kMaxCount = int64_t{1} << 53;  // exact in a double
// A year: a deadline in Unix milliseconds stays far from overflow.
constexpr int64_t kMaxRequestSeconds = 366 * 24 * 3600;

bool IsLowerHex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// Walks the YAML tree of one policy file into a RawPolicy, checking types and
// references on the way. Sections are read in dependency order (models and principals
// before grants and examples) whatever their order in the file.
class PolicyReader {
 public:
  explicit PolicyReader(std::string source) : ctx_(std::move(source)) {}

  absl::StatusOr<RawPolicy> Read(absl::string_view text) {
    GANTRY_ASSIGN_OR_RETURN(YamlValue root, ctx_.Parse(text));
    GANTRY_ASSIGN_OR_RETURN(
        YamlFields top,
        ctx_.Map(root, "a mapping with version, defaults, models, principals, grants, examples",
                 {"version", "defaults", "models", "principals", "grants", "examples"}));
    for (const char* key : {"version", "defaults", "models", "principals", "grants"}) {
      if (FindField(top, key) == nullptr) {
        return ctx_.Fail(root, absl::StrCat("missing required key '", key, "'"));
      }
    }
    GANTRY_ASSIGN_OR_RETURN(int64_t version, ctx_.Int(*FindField(top, "version"), 1, 1));
    (void)version;
    GANTRY_RETURN_IF_ERROR(ReadDefaults(*FindField(top, "defaults")));
    GANTRY_RETURN_IF_ERROR(ReadModels(*FindField(top, "models")));
    GANTRY_RETURN_IF_ERROR(ReadPrincipals(*FindField(top, "principals")));
    GANTRY_RETURN_IF_ERROR(ReadGrants(*FindField(top, "grants")));
    if (const YamlValue* examples = FindField(top, "examples")) {
      GANTRY_RETURN_IF_ERROR(ReadExamples(*examples));
    }
    return std::move(raw_);
  }

 private:
  absl::Status Require(const YamlValue& parent, const YamlFields& fields,
                       std::initializer_list<const char*> keys) {
    for (const char* key : keys) {
      if (FindField(fields, key) == nullptr) {
        return ctx_.Fail(parent, absl::StrCat("missing required key '", key, "'"));
      }
    }
    return absl::OkStatus();
  }

  // One budget value. The four counted limits: an unquoted integer from 0 (admits
  // nothing) to kMaxCount, or the unquoted word `unlimited` (kUnlimited); anything else
  // (a quoted number, a float, "Unlimited", "inf", null, ...) is an error, so that no
  // spelling can be read as "no limit" by accident. request_seconds: an integer from 1
  // to kMaxRequestSeconds, never unlimited (0 seconds would refuse everything and a
  // deadline must exist).
  absl::StatusOr<int64_t> ReadBudget(const std::string& key, const YamlValue& value) {
    const bool word = IsPlainScalar(value.node) && value.node.Scalar() == "unlimited";
    if (key == "request_seconds") {
      if (word) {
        return ctx_.Fail(value, absl::StrCat("request_seconds cannot be unlimited; expected an "
                                             "integer in [1, ", kMaxRequestSeconds, "]"));
      }
      return ctx_.Int(value, 1, kMaxRequestSeconds);
    }
    if (word) return kUnlimited;
    auto n = ctx_.Int(value, 0, kMaxCount);
    if (n.ok()) return n;
    return ctx_.Fail(value, absl::StrCat("expected an integer in [0, ", kMaxCount,
                                         "] or unlimited, got ", DescribeYaml(value.node)));
  }

  absl::Status ReadBudgets(const YamlValue& at, bool all_required, RawGrant* grant,
                           Budgets* defaults) {
    GANTRY_ASSIGN_OR_RETURN(
        YamlFields f,
        ctx_.Map(at, "a mapping of budgets",
                 {"tokens_per_day", "tokens_per_month", "requests_per_minute",
                  "concurrent_requests", "request_seconds"}));
    if (all_required) {
      GANTRY_RETURN_IF_ERROR(Require(at, f, {"tokens_per_day", "tokens_per_month",
                                             "requests_per_minute", "concurrent_requests"}));
    }
    for (const auto& [key, value] : f) {
      GANTRY_ASSIGN_OR_RETURN(int64_t n, ReadBudget(key, value));
      if (defaults != nullptr) {
        if (key == "tokens_per_day") defaults->tokens_per_day = n;
        if (key == "tokens_per_month") defaults->tokens_per_month = n;
        if (key == "requests_per_minute") defaults->requests_per_minute = n;
        if (key == "concurrent_requests") defaults->concurrent_requests = n;
        if (key == "request_seconds") defaults->request_seconds = n;
      } else {
        if (key == "tokens_per_day") grant->tokens_per_day = n;
        if (key == "tokens_per_month") grant->tokens_per_month = n;
        if (key == "requests_per_minute") grant->requests_per_minute = n;
        if (key == "concurrent_requests") grant->concurrent_requests = n;
        if (key == "request_seconds") grant->request_seconds = n;
      }
    }
    return absl::OkStatus();
  }

  absl::Status ReadDefaults(const YamlValue& at) {
    GANTRY_ASSIGN_OR_RETURN(YamlFields f, ctx_.Map(at, "a mapping with budgets, advertised_tools",
                                                   {"budgets", "advertised_tools"}));
    GANTRY_RETURN_IF_ERROR(Require(at, f, {"budgets"}));
    if (const YamlValue* advertised = FindField(f, "advertised_tools")) {
      GANTRY_ASSIGN_OR_RETURN(std::string mode, ctx_.String(*advertised));
      if (mode == "strip") {
        raw_.advertised_tools = AdvertisedTools::kStrip;
      } else if (mode == "reject") {
        raw_.advertised_tools = AdvertisedTools::kReject;
      } else if (mode == "allow") {
        // Once the default: it passed ungranted tools to the model. Refused by name, so
        // that an old file does not load with a meaning it no longer has.
        return ctx_.Fail(*advertised,
                         "expected strip or reject, got 'allow' (removed: a request may offer "
                         "only granted tools; 'strip' removes the others, 'reject' refuses "
                         "the request)");
      } else {
        return ctx_.Fail(*advertised, absl::StrCat("expected strip or reject, got '", mode, "'"));
      }
    }
    return ReadBudgets(*FindField(f, "budgets"), true, nullptr, &raw_.defaults);
  }

  absl::Status ReadModels(const YamlValue& at) {
    GANTRY_ASSIGN_OR_RETURN(std::vector<YamlValue> items,
                            ctx_.Seq(at, "a sequence of models"));
    for (const YamlValue& item : items) {
      GANTRY_ASSIGN_OR_RETURN(YamlFields f,
                              ctx_.Map(item, "a mapping with name, bundles",
                                       {"name", "bundles", "description"}));
      GANTRY_RETURN_IF_ERROR(Require(item, f, {"name", "bundles"}));
      ModelInfo model;
      GANTRY_ASSIGN_OR_RETURN(model.name, ctx_.Name(*FindField(f, "name")));
      GANTRY_ASSIGN_OR_RETURN(model.bundles, ctx_.NameList(*FindField(f, "bundles")));
      if (model.bundles.empty()) {
        return ctx_.Fail(*FindField(f, "bundles"), "expected at least one bundle");
      }
      if (const YamlValue* d = FindField(f, "description")) {
        GANTRY_RETURN_IF_ERROR(ctx_.String(*d).status());
      }
      if (!model_names_.insert(model.name).second) {
        return ctx_.Fail(*FindField(f, "name"), absl::StrCat("duplicate model '", model.name, "'"));
      }
      raw_.models.push_back(std::move(model));
    }
    return absl::OkStatus();
  }

  absl::Status ReadPrincipals(const YamlValue& at) {
    GANTRY_ASSIGN_OR_RETURN(
        YamlFields f, ctx_.Map(at, "a mapping with groups, users, service_accounts",
                               {"groups", "users", "service_accounts"}));
    if (const YamlValue* groups = FindField(f, "groups")) {
      GANTRY_ASSIGN_OR_RETURN(std::vector<YamlValue> items,
                              ctx_.Seq(*groups, "a sequence of groups"));
      for (const YamlValue& item : items) {
        GANTRY_ASSIGN_OR_RETURN(YamlFields g, ctx_.Map(item, "a mapping with name",
                                                       {"name", "description"}));
        GANTRY_RETURN_IF_ERROR(Require(item, g, {"name"}));
        GANTRY_ASSIGN_OR_RETURN(std::string name, ctx_.Name(*FindField(g, "name")));
        if (const YamlValue* d = FindField(g, "description")) {
          GANTRY_RETURN_IF_ERROR(ctx_.String(*d).status());
        }
        if (!group_names_.insert(name).second) {
          return ctx_.Fail(*FindField(g, "name"), absl::StrCat("duplicate group '", name, "'"));
        }
        raw_.groups.push_back(name);
      }
    }
    for (const char* section : {"users", "service_accounts"}) {
      const YamlValue* list = FindField(f, section);
      if (list == nullptr) continue;
      PrincipalKind kind =
          std::string(section) == "users" ? PrincipalKind::kUser : PrincipalKind::kServiceAccount;
      GANTRY_ASSIGN_OR_RETURN(std::vector<YamlValue> items,
                              ctx_.Seq(*list, absl::StrCat("a sequence of ", section)));
      for (const YamlValue& item : items) {
        GANTRY_RETURN_IF_ERROR(ReadPrincipal(item, kind));
      }
    }
    return absl::OkStatus();
  }

  absl::Status ReadPrincipal(const YamlValue& item, PrincipalKind kind) {
    GANTRY_ASSIGN_OR_RETURN(
        YamlFields f, ctx_.Map(item, "a mapping with name, key_sha256, priority",
                               {"name", "key_sha256", "priority", "groups", "description",
                                "special_tokens_in_content"}));
    GANTRY_RETURN_IF_ERROR(Require(item, f, {"name", "key_sha256", "priority"}));
    RawPrincipal p;
    p.kind = kind;
    GANTRY_ASSIGN_OR_RETURN(p.name, ctx_.Name(*FindField(f, "name")));
    const YamlValue& key = *FindField(f, "key_sha256");
    GANTRY_ASSIGN_OR_RETURN(p.key_sha256, ctx_.String(key));
    if (!IsLowerHex64(p.key_sha256)) {
      return ctx_.Fail(key, "expected 64 lowercase hex digits (sha256sum of the key)");
    }
    const YamlValue& priority = *FindField(f, "priority");
    GANTRY_ASSIGN_OR_RETURN(std::string pri, ctx_.String(priority));
    if (pri == "interactive") {
      p.priority = Priority::kInteractive;
    } else if (pri == "accessibility") {
      p.priority = Priority::kAccessibility;
    } else if (pri == "batch") {
      p.priority = Priority::kBatch;
    } else {
      return ctx_.Fail(priority, absl::StrCat("expected interactive, accessibility or batch, got '",
                                              pri, "'"));
    }
    if (const YamlValue* special = FindField(f, "special_tokens_in_content")) {
      GANTRY_ASSIGN_OR_RETURN(p.special_tokens_in_content, ctx_.Bool(*special));
    }
    if (const YamlValue* groups = FindField(f, "groups")) {
      GANTRY_ASSIGN_OR_RETURN(p.groups, ctx_.NameList(*groups));
      for (const std::string& g : p.groups) {
        if (!group_names_.contains(g)) {
          return ctx_.Fail(*groups, absl::StrCat("unknown group '", g, "'"));
        }
      }
    }
    if (const YamlValue* d = FindField(f, "description")) {
      GANTRY_RETURN_IF_ERROR(ctx_.String(*d).status());
    }
    if (principal_kinds_.contains(p.name)) {
      return ctx_.Fail(*FindField(f, "name"),
                       absl::StrCat("duplicate principal '", p.name,
                                    "' (users and service accounts share one namespace)"));
    }
    if (!keys_.insert(p.key_sha256).second) {
      return ctx_.Fail(key, "this key_sha256 is already used by another principal");
    }
    principal_kinds_[p.name] = kind;
    raw_.principals.push_back(std::move(p));
    return absl::OkStatus();
  }

  // One parameter bound of one model in one grant.
  absl::Status ReadBound(Param param, const YamlValue& at, GrantBound* bound) {
    bound->rule_id = at.path;
    const bool choice = param == Param::kToolChoice;
    const bool flag = ParamIsFlag(param);
    const char* expected = choice ? "a mapping with allowed/action"
                           : flag ? "a mapping with allowed/action"
                                  : "a mapping with min/max/action";
    std::vector<absl::string_view> keys =
        choice || flag ? std::vector<absl::string_view>{"allowed", "action"}
                       : std::vector<absl::string_view>{"min", "max", "action"};
    GANTRY_ASSIGN_OR_RETURN(YamlFields f, ctx_.Map(at, expected, keys));
    if (const YamlValue* action = FindField(f, "action")) {
      GANTRY_ASSIGN_OR_RETURN(std::string a, ctx_.String(*action));
      if (a == "reject") {
        bound->action = BoundAction::kReject;
      } else if (a == "clamp" && !choice) {
        bound->action = BoundAction::kClamp;
      } else {
        return ctx_.Fail(*action, choice ? "expected reject (tool_choice cannot be clamped)"
                                         : "expected reject or clamp");
      }
    }
    if (choice) {
      GANTRY_RETURN_IF_ERROR(Require(at, f, {"allowed"}));
      const YamlValue& allowed = *FindField(f, "allowed");
      GANTRY_ASSIGN_OR_RETURN(std::vector<std::string> names, ctx_.StringList(allowed));
      bound->allowed_mask = 0;
      for (const std::string& name : names) {
        auto v = ParseParamValue(param, name);
        if (!v.ok()) return ctx_.Fail(allowed, std::string(v.status().message()));
        bound->allowed_mask |= 1u << static_cast<int>(*v);
      }
      if (bound->allowed_mask == 0) return ctx_.Fail(allowed, "expected at least one value");
      return absl::OkStatus();
    }
    if (flag) {
      GANTRY_RETURN_IF_ERROR(Require(at, f, {"allowed"}));
      GANTRY_ASSIGN_OR_RETURN(bool allowed, ctx_.Bool(*FindField(f, "allowed")));
      bound->min = 0;
      bound->max = allowed ? 1 : 0;
      return absl::OkStatus();
    }
    const YamlValue* min = FindField(f, "min");
    const YamlValue* max = FindField(f, "max");
    if (min == nullptr && max == nullptr) return ctx_.Fail(at, "expected min, max or both");
    for (const YamlValue* v : {min, max}) {
      if (v == nullptr) continue;
      double value = 0;
      if (param == Param::kReasoningEffort) {
        GANTRY_ASSIGN_OR_RETURN(std::string name, ctx_.String(*v));
        auto parsed = ParseParamValue(param, name);
        if (!parsed.ok()) return ctx_.Fail(*v, std::string(parsed.status().message()));
        value = *parsed;
      } else {
        GANTRY_ASSIGN_OR_RETURN(value, ctx_.Number(*v));
        if (value < 0) return ctx_.Fail(*v, "expected a value >= 0");
        // Compare before any conversion: casting an out-of-range double is undefined.
        if (ParamIsIntegral(param) &&
            (value > static_cast<double>(kMaxCount) || value != std::floor(value))) {
          return ctx_.Fail(*v, absl::StrCat("expected a whole number for ", ParamName(param)));
        }
      }
      (v == min ? bound->min : bound->max) = value;
    }
    if (bound->min > bound->max) return ctx_.Fail(at, "min is greater than max");
    if (param == Param::kStopStrings && min != nullptr && bound->min > 0 &&
        bound->action == BoundAction::kClamp) {
      // Clamping up would need stop strings the request does not have.
      return ctx_.Fail(*min, "stop_strings: a min cannot be clamped to (the router cannot add "
                             "stop strings); use action: reject");
    }
    return absl::OkStatus();
  }

  absl::Status ReadModelGrants(const YamlValue& at, RawGrant* grant) {
    GANTRY_ASSIGN_OR_RETURN(YamlFields models,
                            ctx_.Map(at, "a mapping from model name to parameter bounds"));
    for (const auto& [name, value] : models) {
      if (!model_names_.contains(name)) {
        return ctx_.Fail(value, absl::StrCat("unknown model '", name, "' (not in models)"));
      }
      RawModelGrant model;
      model.model = name;
      model.rule_id = value.path;
      GANTRY_ASSIGN_OR_RETURN(
          YamlFields params,
          ctx_.Map(value, "a mapping from parameter name to bound ({} for no bounds)"));
      for (const auto& [param_name, bound_value] : params) {
        std::optional<Param> param = ParamFromName(param_name);
        if (!param) {
          return ctx_.Fail(bound_value,
                           absl::StrCat("unknown parameter '", param_name,
                                        "'; expected max_tokens, temperature, top_p, top_k, "
                                        "seed, stop_strings, tool_choice, "
                                        "parallel_tool_calls, reasoning_effort or "
                                        "enable_thinking"));
        }
        GrantBound bound;
        GANTRY_RETURN_IF_ERROR(ReadBound(*param, bound_value, &bound));
        model.bounds[static_cast<int>(*param)] = std::move(bound);
      }
      grant->models.push_back(std::move(model));
    }
    return absl::OkStatus();
  }

  absl::Status ReadGlobs(const YamlValue& at, std::vector<std::string>* globs) {
    GANTRY_ASSIGN_OR_RETURN(*globs, ctx_.StringList(at));
    if (globs->empty()) return ctx_.Fail(at, "expected at least one glob");
    return absl::OkStatus();
  }

  absl::Status ReadTools(const YamlValue& at, RawGrant* grant) {
    GANTRY_ASSIGN_OR_RETURN(YamlFields tools,
                            ctx_.Map(at, "a mapping from tool name to its constraints"));
    for (const auto& [name, value] : tools) {
      GANTRY_RETURN_IF_ERROR(ctx_.Name(YamlValue{YAML::Node(name), value.mark, value.path}).status());
      ToolGrant tool;
      tool.rule_id = value.path;
      GANTRY_ASSIGN_OR_RETURN(YamlFields f,
                              ctx_.Map(value, "a mapping with args ({} for no constraints)",
                                       {"args"}));
      if (const YamlValue* args = FindField(f, "args")) {
        GANTRY_ASSIGN_OR_RETURN(YamlFields arg_fields,
                                ctx_.Map(*args, "a mapping from argument name to constraint"));
        for (const auto& [arg, constraint] : arg_fields) {
          ArgConstraint c;
          c.rule_id = constraint.path;
          c.arg = arg;
          GANTRY_ASSIGN_OR_RETURN(YamlFields cf, ctx_.Map(constraint, "a mapping with globs/one_of",
                                                          {"globs", "one_of"}));
          if (const YamlValue* g = FindField(cf, "globs")) GANTRY_RETURN_IF_ERROR(ReadGlobs(*g, &c.globs));
          if (const YamlValue* o = FindField(cf, "one_of")) {
            GANTRY_ASSIGN_OR_RETURN(c.one_of, ctx_.StringList(*o));
            if (c.one_of.empty()) return ctx_.Fail(*o, "expected at least one value");
          }
          if (c.globs.empty() && c.one_of.empty()) {
            return ctx_.Fail(constraint, "expected globs, one_of or both");
          }
          tool.args.push_back(std::move(c));
        }
      }
      grant->tools.emplace_back(name, std::move(tool));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> Executable(const YamlValue& at) {
    GANTRY_ASSIGN_OR_RETURN(std::string exe, ctx_.String(at));
    if (exe[0] != '/' || !IsCleanPath(exe) || exe == "/") {
      return ctx_.Fail(at, absl::StrCat("expected the absolute, resolved path of an executable "
                                        "(e.g. /usr/bin/git), got '",
                                        exe, "'"));
    }
    return exe;
  }

  absl::Status ReadFlags(const YamlValue& at, std::vector<std::string>* flags) {
    GANTRY_ASSIGN_OR_RETURN(*flags, ctx_.StringList(at));
    for (const std::string& flag : *flags) {
      if (flag.size() < 2 || flag[0] != '-' || flag == "--") {
        return ctx_.Fail(at, absl::StrCat("expected flags like -x or --name, got '", flag, "'"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status ReadCommands(const YamlValue& at, RawGrant* grant) {
    GANTRY_ASSIGN_OR_RETURN(std::vector<YamlValue> items,
                            ctx_.Seq(at, "a sequence of command rules"));
    for (const YamlValue& item : items) {
      GANTRY_ASSIGN_OR_RETURN(
          YamlFields f,
          ctx_.Map(item, "a mapping with executable and argument rules",
                   {"executable", "subcommands", "allowed_flags", "forbidden_flags",
                    "operands", "max_args"}));
      GANTRY_RETURN_IF_ERROR(Require(item, f, {"executable"}));
      CommandRule rule;
      rule.rule_id = item.path;
      GANTRY_ASSIGN_OR_RETURN(rule.executable, Executable(*FindField(f, "executable")));
      if (const YamlValue* v = FindField(f, "subcommands")) {
        GANTRY_ASSIGN_OR_RETURN(rule.subcommands, ctx_.StringList(*v));
        if (rule.subcommands.empty()) return ctx_.Fail(*v, "expected at least one subcommand");
      }
      if (const YamlValue* v = FindField(f, "allowed_flags")) {
        rule.has_allowed_flags = true;
        GANTRY_RETURN_IF_ERROR(ReadFlags(*v, &rule.allowed_flags));
      }
      if (const YamlValue* v = FindField(f, "forbidden_flags")) {
        GANTRY_RETURN_IF_ERROR(ReadFlags(*v, &rule.forbidden_flags));
      }
      if (const YamlValue* v = FindField(f, "operands")) {
        GANTRY_ASSIGN_OR_RETURN(YamlFields of, ctx_.Map(*v, "a mapping with globs", {"globs"}));
        GANTRY_RETURN_IF_ERROR(Require(*v, of, {"globs"}));
        GANTRY_RETURN_IF_ERROR(ReadGlobs(*FindField(of, "globs"), &rule.operand_globs));
      }
      if (const YamlValue* v = FindField(f, "max_args")) {
        GANTRY_ASSIGN_OR_RETURN(rule.max_args, ctx_.Int(*v, 0, 4096));
      }
      grant->commands.push_back(std::move(rule));
    }
    return absl::OkStatus();
  }

  absl::Status ReadDeny(const YamlValue& at, RawGrant* grant) {
    GANTRY_ASSIGN_OR_RETURN(YamlFields f, ctx_.Map(at, "a mapping with models/tools/commands",
                                                   {"models", "tools", "commands"}));
    if (const YamlValue* v = FindField(f, "models")) {
      GANTRY_ASSIGN_OR_RETURN(std::vector<YamlValue> items, ctx_.Seq(*v, "a sequence of models"));
      for (const YamlValue& item : items) {
        GANTRY_ASSIGN_OR_RETURN(std::string name, ctx_.Name(item));
        if (!model_names_.contains(name)) {
          return ctx_.Fail(item, absl::StrCat("unknown model '", name, "' (not in models)"));
        }
        grant->deny_models.emplace_back(name, item.path);
      }
    }
    if (const YamlValue* v = FindField(f, "tools")) {
      GANTRY_ASSIGN_OR_RETURN(std::vector<YamlValue> items, ctx_.Seq(*v, "a sequence of tools"));
      for (const YamlValue& item : items) {
        GANTRY_ASSIGN_OR_RETURN(std::string name, ctx_.Name(item));
        grant->deny_tools.emplace_back(name, item.path);
      }
    }
    if (const YamlValue* v = FindField(f, "commands")) {
      GANTRY_ASSIGN_OR_RETURN(std::vector<YamlValue> items,
                              ctx_.Seq(*v, "a sequence of executable paths"));
      for (const YamlValue& item : items) {
        GANTRY_ASSIGN_OR_RETURN(std::string exe, Executable(item));
        grant->deny_commands.emplace_back(exe, item.path);
      }
    }
    return absl::OkStatus();
  }

  absl::Status ReadGrants(const YamlValue& at) {
    GANTRY_ASSIGN_OR_RETURN(std::vector<YamlValue> items, ctx_.Seq(at, "a sequence of grants"));
    for (const YamlValue& item : items) {
      GANTRY_ASSIGN_OR_RETURN(
          YamlFields f,
          ctx_.Map(item, "a grant mapping",
                   {"user", "service_account", "group", "description", "models", "tools",
                    "commands", "budgets", "deny"}));
      RawGrant grant;
      grant.id = item.path;
      grant.where = ctx_.Where(item);
      int subjects = 0;
      for (const char* kind : {"user", "service_account", "group"}) {
        const YamlValue* v = FindField(f, kind);
        if (v == nullptr) continue;
        ++subjects;
        GANTRY_ASSIGN_OR_RETURN(grant.subject, ctx_.Name(*v));
        std::string k = kind;
        if (k == "group") {
          grant.to_group = true;
          if (!group_names_.contains(grant.subject)) {
            return ctx_.Fail(*v, absl::StrCat("unknown group '", grant.subject, "'"));
          }
        } else {
          PrincipalKind want = k == "user" ? PrincipalKind::kUser : PrincipalKind::kServiceAccount;
          auto it = principal_kinds_.find(grant.subject);
          if (it == principal_kinds_.end()) {
            return ctx_.Fail(*v, absl::StrCat("unknown ", k == "user" ? "user" : "service account",
                                              " '", grant.subject, "'"));
          }
          if (it->second != want) {
            return ctx_.Fail(*v, absl::StrCat("'", grant.subject, "' is a ",
                                              PrincipalKindName(it->second), ", not a ",
                                              PrincipalKindName(want)));
          }
        }
      }
      if (subjects != 1) {
        return ctx_.Fail(item, "expected exactly one of user, service_account, group");
      }
      if (const YamlValue* v = FindField(f, "description")) {
        GANTRY_RETURN_IF_ERROR(ctx_.String(*v).status());
      }
      if (const YamlValue* v = FindField(f, "models")) GANTRY_RETURN_IF_ERROR(ReadModelGrants(*v, &grant));
      if (const YamlValue* v = FindField(f, "tools")) GANTRY_RETURN_IF_ERROR(ReadTools(*v, &grant));
      if (const YamlValue* v = FindField(f, "commands")) GANTRY_RETURN_IF_ERROR(ReadCommands(*v, &grant));
      if (const YamlValue* v = FindField(f, "budgets")) {
        GANTRY_RETURN_IF_ERROR(ReadBudgets(*v, false, &grant, nullptr));
      }
      if (const YamlValue* v = FindField(f, "deny")) GANTRY_RETURN_IF_ERROR(ReadDeny(*v, &grant));
      raw_.grants.push_back(std::move(grant));
    }
    return absl::OkStatus();
  }

  absl::Status ReadRequest(const YamlValue& at, PolicyRequest* r) {
    GANTRY_ASSIGN_OR_RETURN(
        YamlFields f, ctx_.Map(at, "a request mapping with principal (or key), model, ...",
                               {"principal", "key", "model", "params", "offered_tools", "tools",
                                "commands"}));
    const YamlValue* principal = FindField(f, "principal");
    const YamlValue* key = FindField(f, "key");
    if ((principal == nullptr) == (key == nullptr)) {
      return ctx_.Fail(at, "expected exactly one of principal, key");
    }
    if (principal != nullptr) {
      GANTRY_ASSIGN_OR_RETURN(r->principal, ctx_.Name(*principal));
      if (!principal_kinds_.contains(r->principal)) {
        return ctx_.Fail(*principal, absl::StrCat("unknown principal '", r->principal, "'"));
      }
    } else {
      GANTRY_ASSIGN_OR_RETURN(r->api_key, ctx_.String(*key));
    }
    if (const YamlValue* v = FindField(f, "model")) {
      GANTRY_ASSIGN_OR_RETURN(r->model, ctx_.Name(*v));
    }
    if (const YamlValue* v = FindField(f, "params")) {
      GANTRY_ASSIGN_OR_RETURN(YamlFields params, ctx_.Map(*v, "a mapping of parameter values"));
      for (const auto& [name, value] : params) {
        std::optional<Param> param = ParamFromName(name);
        if (!param) return ctx_.Fail(value, absl::StrCat("unknown parameter '", name, "'"));
        GANTRY_ASSIGN_OR_RETURN(std::string text, ctx_.String(value));
        auto parsed = ParseParamValue(*param, text);
        if (!parsed.ok()) return ctx_.Fail(value, std::string(parsed.status().message()));
        r->params.Set(*param, *parsed);
      }
    }
    if (const YamlValue* v = FindField(f, "offered_tools")) {
      GANTRY_ASSIGN_OR_RETURN(std::vector<YamlValue> items,
                              ctx_.Seq(*v, "a sequence of offered tool names"));
      for (const YamlValue& item : items) {
        GANTRY_ASSIGN_OR_RETURN(std::string name, ctx_.String(item));
        r->offered_tools.push_back(std::move(name));
      }
    }
    if (const YamlValue* v = FindField(f, "tools")) {
      GANTRY_ASSIGN_OR_RETURN(std::vector<YamlValue> items, ctx_.Seq(*v, "a sequence of tool calls"));
      for (const YamlValue& item : items) {
        GANTRY_ASSIGN_OR_RETURN(YamlFields tf, ctx_.Map(item, "a mapping with name, args",
                                                        {"name", "args"}));
        GANTRY_RETURN_IF_ERROR(Require(item, tf, {"name"}));
        ToolCallRequest call;
        GANTRY_ASSIGN_OR_RETURN(call.name, ctx_.Name(*FindField(tf, "name")));
        if (const YamlValue* args = FindField(tf, "args")) {
          GANTRY_ASSIGN_OR_RETURN(YamlFields af, ctx_.Map(*args, "a mapping of argument values"));
          for (const auto& [arg, value] : af) {
            if (!value.node.IsScalar()) {
              return ctx_.Fail(value, absl::StrCat("expected a scalar, got ", DescribeYaml(value.node)));
            }
            // As a model's JSON arguments are read (ToolCallFromJson): an unquoted 5,
            // true or null is not a string, so the router would refuse it where a
            // constraint applies; an example must decide the same.
            const std::string& text = value.node.Scalar();
            if (IsPlainScalar(value.node)) {
              auto parsed = json::Parse(text);
              if (text == "~" || text.empty() || (parsed.ok() && !parsed->is_string())) {
                call.non_string_args.push_back(arg);
              }
            }
            call.args.emplace_back(arg, text);
          }
        }
        r->tools.push_back(std::move(call));
      }
    }
    if (const YamlValue* v = FindField(f, "commands")) {
      GANTRY_ASSIGN_OR_RETURN(std::vector<YamlValue> items,
                              ctx_.Seq(*v, "a sequence of argv sequences"));
      for (const YamlValue& item : items) {
        GANTRY_ASSIGN_OR_RETURN(std::vector<YamlValue> words, ctx_.Seq(item, "an argv sequence"));
        std::vector<std::string> argv;
        for (const YamlValue& word : words) {
          if (!word.node.IsScalar()) {
            return ctx_.Fail(word, absl::StrCat("expected a string, got ", DescribeYaml(word.node)));
          }
          argv.push_back(word.node.Scalar());
        }
        if (argv.empty()) return ctx_.Fail(item, "expected a non-empty argv");
        r->commands.push_back(std::move(argv));
      }
    }
    return absl::OkStatus();
  }

  absl::Status ReadExamples(const YamlValue& at) {
    GANTRY_ASSIGN_OR_RETURN(std::vector<YamlValue> items, ctx_.Seq(at, "a sequence of examples"));
    for (const YamlValue& item : items) {
      GANTRY_ASSIGN_OR_RETURN(
          YamlFields f,
          ctx_.Map(item, "a mapping with should_allow, should_deny or should_clamp",
                   {"should_allow", "should_deny", "should_clamp", "reason", "rule", "clamps",
                    "description"}));
      Example ex;
      ex.where = absl::StrCat(ctx_.Where(item), ": ", item.path);
      int n = 0;
      const YamlValue* request = nullptr;
      for (const char* k : {"should_allow", "should_deny", "should_clamp"}) {
        const YamlValue* v = FindField(f, k);
        if (v == nullptr) continue;
        ++n;
        request = v;
        std::string key = k;
        ex.expect = key == "should_allow"  ? Example::Expect::kAllow
                    : key == "should_deny" ? Example::Expect::kDeny
                                           : Example::Expect::kClamp;
      }
      if (n != 1) return ctx_.Fail(item, "expected exactly one of should_allow, should_deny, should_clamp");
      GANTRY_RETURN_IF_ERROR(ReadRequest(*request, &ex.request));
      if (const YamlValue* v = FindField(f, "reason")) {
        GANTRY_ASSIGN_OR_RETURN(ex.reason, ctx_.String(*v));
      }
      if (const YamlValue* v = FindField(f, "rule")) {
        GANTRY_ASSIGN_OR_RETURN(ex.rule, ctx_.String(*v));
      }
      if (const YamlValue* v = FindField(f, "description")) GANTRY_RETURN_IF_ERROR(ctx_.String(*v).status());
      if (const YamlValue* v = FindField(f, "clamps")) {
        GANTRY_ASSIGN_OR_RETURN(YamlFields cf, ctx_.Map(*v, "a mapping from parameter to applied value"));
        for (const auto& [name, value] : cf) {
          std::optional<Param> param = ParamFromName(name);
          if (!param) return ctx_.Fail(value, absl::StrCat("unknown parameter '", name, "'"));
          GANTRY_ASSIGN_OR_RETURN(std::string text, ctx_.String(value));
          auto parsed = ParseParamValue(*param, text);
          if (!parsed.ok()) return ctx_.Fail(value, std::string(parsed.status().message()));
          ex.clamps.emplace_back(name, FormatParamValue(*param, *parsed));
        }
      }
      raw_.examples.push_back(std::move(ex));
    }
    return absl::OkStatus();
  }

  YamlContext ctx_;
  RawPolicy raw_;
  absl::flat_hash_set<std::string> model_names_;
  absl::flat_hash_set<std::string> group_names_;
  absl::flat_hash_set<std::string> keys_;
  absl::flat_hash_map<std::string, PrincipalKind> principal_kinds_;
};

std::string Describe(const Decision& d) {
  std::string out = VerdictName(d.verdict);
  if (!d.reason.empty()) absl::StrAppend(&out, " (", d.reason, ")");
  absl::StrAppend(&out, " by ", d.rule_id.empty() ? "(none)" : d.rule_id);
  if (!d.message.empty()) absl::StrAppend(&out, ": ", d.message);
  return out;
}

}  // namespace

absl::Status RunPolicyExamples(const Snapshot& snapshot) {
  std::vector<std::string> failures;
  for (const Example& ex : snapshot.examples) {
    // Decided as the router decides a request for a bundle of the default output cap.
    PolicyRequest served = ex.request;
    CompleteAsServed(&served, kDefaultMaxTokens);
    Decision d = Decide(snapshot, served);
    std::string want;
    bool ok = true;
    switch (ex.expect) {
      case Example::Expect::kAllow:
        want = "allow or clamp";
        ok = d.verdict != Verdict::kDeny;
        break;
      case Example::Expect::kDeny:
        want = "deny";
        ok = d.verdict == Verdict::kDeny;
        break;
      case Example::Expect::kClamp:
        want = "clamp";
        ok = d.verdict == Verdict::kClamp;
        break;
    }
    if (!ex.reason.empty()) {
      absl::StrAppend(&want, " with reason ", ex.reason);
      ok = ok && d.reason == ex.reason;
    }
    if (!ex.rule.empty()) {
      absl::StrAppend(&want, " by rule ", ex.rule);
      ok = ok && d.rule_id == ex.rule;
    }
    for (const auto& [field, applied] : ex.clamps) {
      absl::StrAppend(&want, ", ", field, " clamped to ", applied);
      bool found = false;
      for (const ClampRecord& c : d.clamps) found = found || (c.field == field && c.applied == applied);
      ok = ok && found;
    }
    if (!ok) {
      failures.push_back(absl::StrCat(ex.where, ": example failed: expected ", want, ", got ",
                                      Describe(d)));
    }
  }
  if (failures.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(failures, "\n"));
}

absl::StatusOr<std::shared_ptr<const Snapshot>> LoadPolicyText(absl::string_view text,
                                                               absl::string_view source) {
  if (text.size() > kMaxPolicyBytes) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": the file is larger than ",
                                                   kMaxPolicyBytes, " bytes"));
  }
  std::string name(source);
  absl::StatusOr<RawPolicy> raw;
  try {
    PolicyReader reader(name);
    raw = reader.Read(text);
  } catch (const std::exception& e) {
    // yaml-cpp may throw from any accessor; nothing from the file may escape as an
    // exception.
    return absl::InvalidArgumentError(absl::StrCat(name, ": could not read the policy: ", e.what()));
  }
  if (!raw.ok()) return raw.status();
  GANTRY_ASSIGN_OR_RETURN(std::shared_ptr<Snapshot> snap,
                          CompilePolicy(*std::move(raw), Sha256Hex(text), name));
  GANTRY_RETURN_IF_ERROR(RunPolicyExamples(*snap));
  return std::shared_ptr<const Snapshot>(std::move(snap));
}

absl::StatusOr<std::shared_ptr<const Snapshot>> LoadPolicyFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int err = errno;
    std::string why = absl::StrCat(path, ": ", std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(why);
    if (err == EACCES) return absl::PermissionDeniedError(why);
    return absl::DataLossError(why);
  }
  std::string text;
  char buffer[65536];
  while (in.read(buffer, sizeof(buffer)) || in.gcount() > 0) {
    text.append(buffer, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxPolicyBytes) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": the file is larger than ",
                                                     kMaxPolicyBytes, " bytes"));
    }
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read error"));
  size_t slash = path.rfind('/');
  return LoadPolicyText(text, slash == std::string::npos ? path : path.substr(slash + 1));
}

}  // namespace gantry::policy
