#include "policy/policy_decide.h"

#include <algorithm>
#include <cmath>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json.h"
#include "common/sha256.h"
#include "gantry/v1/policy.pb.h"
#include "policy/path_glob.h"

namespace gantry::policy {
namespace {

constexpr char kDefaultDeny[] = "default_deny";

Decision& Deny(Decision& d, absl::string_view rule, absl::string_view reason,
               std::string message) {
  d.verdict = Verdict::kDeny;
  d.rule_id = std::string(rule);
  d.reason = std::string(reason);
  d.message = std::move(message);
  d.clamps.clear();
  d.stripped_tools.clear();
  return d;
}

const Principal* FindPrincipal(const Snapshot& s, const PolicyRequest& r) {
  const absl::flat_hash_map<std::string, int>& index =
      r.api_key.empty() ? s.by_name : s.by_key_sha256;
  auto it = r.api_key.empty() ? index.find(r.principal) : index.find(Sha256Hex(r.api_key));
  return it == index.end() ? nullptr : &s.principals[it->second];
}

// Whether command-line argument `arg` is, or contains, flag `flag`. Long flags also
// match "--flag=value" and an abbreviation of at least three characters ("--outp" for
// "--output", as GNU getopt accepts unique prefixes); a two-character short flag "-x"
// matches any single-dash cluster containing x ("-ax", "-xVALUE"). Over-matching is
// deliberate: it only makes a forbidden flag deny more.
bool FlagMatches(absl::string_view arg, absl::string_view flag) {
  if (arg == flag) return true;
  if (flag.size() > 2 && flag.substr(0, 2) == "--" && arg.size() > 2 && arg.substr(0, 2) == "--") {
    absl::string_view name = arg.substr(0, arg.find('='));
    if (name.size() >= 3 && name.size() <= flag.size() && flag.substr(0, name.size()) == name) {
      return true;
    }
  }
  if (arg.size() > flag.size() && arg.substr(0, flag.size()) == flag &&
      arg[flag.size()] == '=') {
    return true;
  }
  if (flag.size() == 2 && flag[0] == '-' && flag[1] != '-' && arg.size() > 2 &&
      arg[0] == '-' && arg[1] != '-') {
    return arg.find(flag[1], 1) != absl::string_view::npos;
  }
  return false;
}

// Whether `arg` is made only of allowed flags. A single-dash cluster "-la" needs every
// letter allowed as its own short flag.
bool FlagAllowed(absl::string_view arg, const std::vector<std::string>& allowed) {
  for (const std::string& flag : allowed) {
    if (arg == flag) return true;
    if (flag.size() > 2 && arg.size() > flag.size() &&
        arg.substr(0, flag.size()) == flag && arg[flag.size()] == '=') {
      return true;
    }
  }
  if (arg.size() > 2 && arg[0] == '-' && arg[1] != '-') {
    for (size_t i = 1; i < arg.size(); ++i) {
      char short_flag[3] = {'-', arg[i], '\0'};
      if (std::find(allowed.begin(), allowed.end(), short_flag) == allowed.end()) {
        return false;
      }
    }
    return true;
  }
  return false;
}

// An argument name as a lenient JSON reader may match it: cut at a NUL (C strings),
// blanks trimmed, ASCII letters lowered, and the two non-ASCII letters that Unicode case
// folding maps onto ASCII ones (U+017F long s -> s, U+212A Kelvin sign -> k), as Go's
// encoding/json and cJSON's case-insensitive lookups do.
std::string FoldArgName(absl::string_view name) {
  std::string out;
  for (size_t i = 0; i < name.size() && name[i] != '\0'; ++i) {
    const unsigned char c = static_cast<unsigned char>(name[i]);
    if (c == 0xC5 && i + 1 < name.size() && static_cast<unsigned char>(name[i + 1]) == 0xBF) {
      out.push_back('s');
      i += 1;
    } else if (c == 0xE2 && i + 2 < name.size() && static_cast<unsigned char>(name[i + 1]) == 0x84 &&
               static_cast<unsigned char>(name[i + 2]) == 0xAA) {
      out.push_back('k');
      i += 2;
    } else {
      out.push_back(static_cast<char>(absl::ascii_tolower(c)));
    }
  }
  return std::string(absl::StripAsciiWhitespace(out));
}

// Why `constraint` rejects the call's arguments, or "".
std::string ArgMismatch(const ArgConstraint& c, const ToolCallRequest& call) {
  const std::string* value = nullptr;
  const std::string folded = FoldArgName(c.arg);
  for (const auto& [name, text] : call.args) {
    if (name == c.arg) {
      if (value != nullptr) return absl::StrCat("argument '", c.arg, "' appears twice");
      value = &text;
    } else if (FoldArgName(name) == folded) {
      // "Path" next to "path": a reader that matches keys without regard to case (or
      // that stops at a NUL) may run the unchecked one.
      return absl::StrCat("an argument named like '", c.arg,
                          "' (another case, blanks or a NUL) stands beside it");
    }
  }
  if (value == nullptr) return absl::StrCat("argument '", c.arg, "' is required by ", c.rule_id);
  if (std::find(call.non_string_args.begin(), call.non_string_args.end(), c.arg) !=
      call.non_string_args.end()) {
    return absl::StrCat("argument '", c.arg, "' is not a string");
  }
  if (!c.one_of.empty() &&
      std::find(c.one_of.begin(), c.one_of.end(), *value) == c.one_of.end()) {
    return absl::StrCat("argument '", c.arg, "' = '", *value, "' is not one of [",
                        absl::StrJoin(c.one_of, ", "), "]");
  }
  if (!c.globs.empty()) {
    bool any = false;
    for (const std::string& glob : c.globs) any = any || GlobMatch(glob, *value);
    if (!any) {
      return absl::StrCat("argument '", c.arg, "' = '", *value, "' matches none of [",
                          absl::StrJoin(c.globs, ", "), "]");
    }
  }
  return "";
}

// Temperature and top_p reach the worker as 32-bit floats (gantry.v1.SamplingParams), so
// both are decided at that precision, request and bounds alike: "temperature: 1.2" in a
// JSON body, in a gRPC request and on explain's command line is the float nearest 1.2,
// and so is a bound's "max: 1.2", which therefore admits it. (Compared as doubles, the
// float 1.2000000477 a router has parsed is above the bound that explain's 1.2 is not.)
double AsCarried(Param param, double value) {
  if (param != Param::kTemperature && param != Param::kTopP) return value;
  return static_cast<double>(static_cast<float>(value));
}

// Checks the model and its parameters; returns false after denying.
bool DecideModel(const Snapshot& s, const Principal& p, const PolicyRequest& r,
                 Decision& d, std::string* allow_rule, std::string* clamp_rule) {
  if (!s.models.contains(r.model)) {
    Deny(d, "models", "unknown_model",
         absl::StrCat("model '", r.model, "' is not declared in the policy"));
    return false;
  }
  auto it = p.models.find(r.model);
  if (it == p.models.end()) {
    Deny(d, kDefaultDeny, "model_not_granted",
         absl::StrCat("no grant of '", p.name, "' names model '", r.model, "'"));
    return false;
  }
  const ModelAccess& access = it->second;
  if (!access.deny_rule.empty()) {
    Deny(d, access.deny_rule, "model_not_granted",
         absl::StrCat("model '", r.model, "' is denied to '", p.name, "'"));
    return false;
  }
  *allow_rule = access.grant_rule;
  for (int i = 0; i < kParamCount; ++i) {
    Param param = static_cast<Param>(i);
    if (!r.params.Has(param)) continue;
    double v = r.params.Get(param);
    // NaN compares false with every bound, so it would slip through; reject it and any
    // value outside the parameter's domain before looking at bounds.
    bool valid = !std::isnan(v) && (!ParamIsIntegral(param) || v == std::floor(v));
    if (param == Param::kToolChoice) valid = valid && v >= 0 && v <= 3;
    if (ParamIsFlag(param)) valid = valid && (v == 0 || v == 1);
    if (!valid) {
      Deny(d, "request", "invalid_request",
           absl::StrCat(ParamName(param), " has a value outside its domain"));
      return false;
    }
  }
  if (!r.template_kwargs.empty()) {
    Deny(d, kDefaultDeny, "template_kwarg_not_granted",
         absl::StrCat("chat_template_kwargs key '", r.template_kwargs.front(),
                      "' is not granted (the only template variable a grant can bound is "
                      "enable_thinking)"));
    return false;
  }
  for (int i = 0; i < kParamCount; ++i) {
    const ParamRule& rule = access.params[i];
    Param param = static_cast<Param>(i);
    if (rule.parts.empty()) {
      if (ParamNeedsGrant(param) && r.params.Has(param)) {
        Deny(d, kDefaultDeny, "parameter_not_granted",
             absl::StrCat("no grant of '", p.name, "' on model '", r.model, "' bounds ",
                          ParamName(param), ", so the request may not set it"));
        return false;
      }
      continue;
    }
    const bool requested = r.params.Has(param);
    if (!requested && r.offered_tools.empty() &&
        (param == Param::kParallelToolCalls || param == Param::kToolChoice)) {
      continue;  // no tools offered: no call to bound, whatever the default
    }
    if (!requested && !r.defaults.Has(param)) {
      // Omitted, and no default is known (seed; anything when the caller gave no
      // defaults): "unset" could be anything, so the bound's value is used instead.
      const double applied = AsCarried(param, rule.hi != kNoMax ? rule.hi : rule.lo);
      if (applied == kNoMin) continue;  // a tool_choice set: the parser always sets it
      d.effective.Set(param, applied);
      d.clamps.push_back({ParamName(param), "unset", FormatParamValue(param, applied)});
      if (clamp_rule->empty()) {
        for (const GrantBound& part : rule.parts) {
          if (AsCarried(param, part.max) == applied || AsCarried(param, part.min) == applied) {
            *clamp_rule = part.rule_id;
            break;
          }
        }
      }
      continue;
    }
    const double v = AsCarried(param, requested ? r.params.Get(param) : r.defaults.Get(param));
    // The value as messages show it; made only for a denial or a clamp.
    auto shown = [&] {
      return requested ? FormatParamValue(param, v)
                       : absl::StrCat("unset (default ", FormatParamValue(param, v), ")");
    };
    // top_k 0 means "off": every token, compared as no bound at all.
    const double compared = param == Param::kTopK && v == 0 ? kNoMax : v;
    const GrantBound* clamp_part = nullptr;
    for (const GrantBound& part : rule.parts) {
      bool outside = param == Param::kToolChoice
                         ? !(part.allowed_mask & (1u << static_cast<int>(v)))
                         : (compared < AsCarried(param, part.min) ||
                            compared > AsCarried(param, part.max));
      if (!outside) continue;
      if (part.action == BoundAction::kReject || param == Param::kToolChoice) {
        Deny(d, part.rule_id, "parameter_out_of_range",
             absl::StrCat(ParamName(param), " = ", shown(), " is outside the bound of ",
                          part.rule_id));
        return false;
      }
      if (clamp_part == nullptr) clamp_part = &part;
    }
    double applied = v;
    if (clamp_part != nullptr) {
      applied = std::min(std::max(compared, AsCarried(param, rule.lo)), AsCarried(param, rule.hi));
      d.clamps.push_back({ParamName(param), requested ? shown() : "unset",
                          FormatParamValue(param, applied)});
      if (clamp_rule->empty()) *clamp_rule = clamp_part->rule_id;
    }
    d.effective.Set(param, applied);
  }
  return true;
}

}  // namespace

ToolCallRequest ToolCallFromJson(std::string name, absl::string_view arguments_json) {
  ToolCallRequest call;
  call.name = std::move(name);
  json::ParseOptions options;
  options.reject_duplicate_keys = true;
  auto parsed = json::Parse(arguments_json, options);
  if (!parsed.ok()) {
    call.malformed = absl::StrCat("the arguments are not valid JSON (", parsed.status().message(), ")");
    return call;
  }
  if (!parsed->is_object()) {
    call.malformed = "the arguments are not a JSON object";
    return call;
  }
  for (auto& [key, value] : parsed->members()) {
    if (value.is_string()) {
      call.args.emplace_back(key, value.as_string());
    } else {
      call.args.emplace_back(key, json::DumpCompact(value));
      call.non_string_args.push_back(key);
    }
  }
  return call;
}

bool ModelGranted(const Snapshot& snapshot, const std::string& principal,
                  const std::string& model) {
  auto by_name = snapshot.by_name.find(principal);
  if (by_name == snapshot.by_name.end()) return false;
  const Principal& p = snapshot.principals[by_name->second];
  auto it = p.models.find(model);
  return it != p.models.end() && !it->second.grant_rule.empty() &&
         it->second.deny_rule.empty();
}

namespace {

// The name-level check of a tool, offered or called: its access when some grant of `p`
// names it and no deny does; else nullptr, with `refusal` set to the rule that refuses
// it ("default_deny" or "grants[i].deny.tools[k]").
const ToolAccess* GrantedTool(const Principal& p, const std::string& name, std::string* refusal) {
  auto it = p.tools.find(name);
  if (it == p.tools.end()) {
    *refusal = kDefaultDeny;
    return nullptr;
  }
  if (!it->second.deny_rule.empty()) {
    *refusal = it->second.deny_rule;
    return nullptr;
  }
  return &it->second;
}

bool DecideTool(const Principal& p, const ToolCallRequest& call, Decision& d,
                std::string* allow_rule) {
  std::string refusal;
  const ToolAccess* granted = GrantedTool(p, call.name, &refusal);
  if (granted == nullptr) {
    Deny(d, refusal, "tool_not_granted",
         refusal == kDefaultDeny
             ? absl::StrCat("no grant of '", p.name, "' names tool '", call.name, "'")
             : absl::StrCat("tool '", call.name, "' is denied to '", p.name, "'"));
    return false;
  }
  const ToolAccess& access = *granted;
  if (!call.malformed.empty()) {
    // Also under a grant of "any arguments": those are the arguments of one object.
    Deny(d, "request", "tool_arguments_not_allowed",
         absl::StrCat("tool '", call.name, "': ", call.malformed));
    return false;
  }
  for (const ToolGrant& grant : access.grants) {
    for (const ArgConstraint& c : grant.args) {
      std::string why = ArgMismatch(c, call);
      if (!why.empty()) {
        Deny(d, c.rule_id, "tool_arguments_not_allowed",
             absl::StrCat("tool '", call.name, "': ", why));
        return false;
      }
    }
  }
  if (allow_rule->empty()) *allow_rule = access.grants.front().rule_id;
  return true;
}

// The tools the request offers: each by name against the grants; the ungranted ones
// stripped or the request refused, as the snapshot says. Returns false after denying.
bool DecideOfferedTools(const Snapshot& s, const Principal& p, const PolicyRequest& r,
                        Decision& d) {
  absl::flat_hash_set<absl::string_view> seen;
  for (const std::string& name : r.offered_tools) {
    if (!seen.insert(name).second) {
      Deny(d, "request", "invalid_request",
           absl::StrCat("the request offers tool '", name, "' twice"));
      return false;
    }
    OfferedToolVerdict verdict{name, false, ""};
    if (const ToolAccess* granted = GrantedTool(p, name, &verdict.rule_id)) {
      verdict.granted = true;
      verdict.rule_id = granted->grants.front().rule_id;
    }
    d.offered_tools.push_back(verdict);
    if (verdict.granted) continue;
    if (s.advertised_tools == AdvertisedTools::kReject) {
      Deny(d, verdict.rule_id, "tool_not_granted",
           absl::StrCat("the request offers tool '", name, "', which '", p.name,
                        "' may not use"));
      return false;
    }
    d.stripped_tools.push_back(name);
  }
  if (!r.params.Has(Param::kToolChoice) || r.offered_tools.empty()) return true;
  const auto choice = static_cast<ToolChoice>(static_cast<int>(r.params.Get(Param::kToolChoice)));
  if (choice == ToolChoice::kNamed) {
    for (const OfferedToolVerdict& v : d.offered_tools) {
      if (v.name == r.tool_choice_name && !v.granted) {
        Deny(d, v.rule_id, "tool_not_granted",
             absl::StrCat("tool_choice names tool '", v.name, "', which '", p.name,
                          "' may not use"));
        return false;
      }
    }
  } else if (choice == ToolChoice::kRequired &&
             d.stripped_tools.size() == r.offered_tools.size()) {
    Deny(d, kDefaultDeny, "tool_not_granted",
         "tool_choice is required and no offered tool is granted");
    return false;
  }
  return true;
}

bool DecideCommand(const Principal& p, const std::vector<std::string>& argv,
                   absl::string_view cwd, const OperandResolver* operands, Decision& d,
                   std::string* allow_rule) {
  if (argv.empty()) {
    Deny(d, "request", "invalid_request", "a command has an empty argv");
    return false;
  }
  const std::string& exe = argv[0];
  if (exe.empty() || exe[0] != '/' || !IsCleanPath(exe)) {
    Deny(d, kDefaultDeny, "command_not_granted",
         absl::StrCat("argv[0] '", exe,
                      "' is not a resolved absolute path; rules name executables by "
                      "absolute path"));
    return false;
  }
  auto it = p.commands.find(exe);
  if (it == p.commands.end()) {
    Deny(d, kDefaultDeny, "command_not_granted",
         absl::StrCat("no grant of '", p.name, "' names executable '", exe, "'"));
    return false;
  }
  const CommandAccess& access = it->second;
  if (!access.deny_rule.empty()) {
    Deny(d, access.deny_rule, "command_not_granted",
         absl::StrCat("executable '", exe, "' is denied to '", p.name, "'"));
    return false;
  }
  const std::string* accepted_by = nullptr;
  for (const CommandGrant& grant : access.grants) {
    std::string first_why;
    const CommandRule* matched = nullptr;
    for (const CommandRule& rule : grant.rules) {
      std::string why = CommandRuleMismatch(rule, argv, cwd, operands);
      if (why.empty()) {
        matched = &rule;
        break;
      }
      if (first_why.empty()) first_why = std::move(why);
    }
    if (matched == nullptr) {
      Deny(d, grant.rules.front().rule_id, "command_arguments_not_allowed",
           absl::StrCat("'", exe, "': ", first_why));
      return false;
    }
    if (accepted_by == nullptr) accepted_by = &matched->rule_id;
  }
  if (allow_rule->empty() && accepted_by != nullptr) *allow_rule = *accepted_by;
  return true;
}

}  // namespace

std::string CommandRuleMismatch(const CommandRule& rule, const std::vector<std::string>& argv,
                                absl::string_view cwd, const OperandResolver* operands) {
  if (argv.empty() || argv[0] != rule.executable) return "a different executable";
  if (rule.max_args >= 0 && static_cast<int64_t>(argv.size()) - 1 > rule.max_args) {
    return absl::StrCat("more than ", rule.max_args, " arguments");
  }
  size_t i = 1;
  if (!rule.subcommands.empty()) {
    if (argv.size() < 2) {
      return absl::StrCat("argv[1] must be a subcommand, one of [",
                          absl::StrJoin(rule.subcommands, ", "), "]");
    }
    if (std::find(rule.subcommands.begin(), rule.subcommands.end(), argv[1]) ==
        rule.subcommands.end()) {
      return absl::StrCat("subcommand '", argv[1], "' is not one of [",
                          absl::StrJoin(rule.subcommands, ", "), "]");
    }
    i = 2;
  }
  bool options_done = false;
  for (; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (!options_done && arg == "--") {
      options_done = true;
      continue;
    }
    if (!options_done && arg.size() > 1 && arg[0] == '-') {
      for (const std::string& flag : rule.forbidden_flags) {
        if (FlagMatches(arg, flag)) {
          return absl::StrCat("flag '", arg, "' is forbidden (", flag, ")");
        }
      }
      if (rule.has_allowed_flags && !FlagAllowed(arg, rule.allowed_flags)) {
        return absl::StrCat("flag '", arg, "' is not among the allowed flags [",
                            absl::StrJoin(rule.allowed_flags, ", "), "]");
      }
      continue;
    }
    if (!rule.operand_globs.empty()) {
      auto matches = [&](const std::string& path) {
        bool any = false;
        for (const std::string& glob : rule.operand_globs) any = any || GlobMatch(glob, path);
        return any;
      };
      const std::string path = cwd.empty() ? arg : AbsoluteCleanPath(cwd, arg);
      if (!matches(path)) {
        const std::string shown = path == arg ? "" : absl::StrCat(" (", path, ")");
        return absl::StrCat("operand '", arg, "'", shown, " matches none of [",
                            absl::StrJoin(rule.operand_globs, ", "), "]");
      }
      if (operands != nullptr && *operands) {
        const OperandPath real = (*operands)(cwd, arg);
        if (!real.denial.empty()) return absl::StrCat("operand '", arg, "': ", real.denial);
        if (!real.real.empty() && real.real != path && !matches(real.real)) {
          return absl::StrCat("operand '", arg, "' resolves to '", real.real,
                              "', which matches none of [",
                              absl::StrJoin(rule.operand_globs, ", "), "]");
        }
      }
    }
  }
  return "";
}

Decision Decide(const Snapshot& s, const PolicyRequest& r) {
  Decision d;
  d.policy_sha256 = s.sha256;
  d.effective = r.params;
  const Principal* p = FindPrincipal(s, r);
  if (p == nullptr) {
    return Deny(d, "principals", "unknown_principal",
                r.api_key.empty()
                    ? absl::StrCat("no user or service account is named '", r.principal, "'")
                    : std::string("no user or service account has this key"));
  }
  d.principal = p->name;
  d.priority = p->priority;
  d.special_tokens_in_content = p->special_tokens_in_content;
  d.budgets = p->budgets;
  if (r.model.empty() && r.tools.empty() && r.commands.empty()) {
    return Deny(d, "request", "invalid_request",
                "the request names no model, tool or command");
  }
  std::string allow_rule;
  std::string clamp_rule;
  if (!r.model.empty() && !DecideModel(s, *p, r, d, &allow_rule, &clamp_rule)) return d;
  if (!DecideOfferedTools(s, *p, r, d)) return d;
  for (const ToolCallRequest& call : r.tools) {
    if (!DecideTool(*p, call, d, &allow_rule)) return d;
  }
  for (const std::vector<std::string>& argv : r.commands) {
    if (!DecideCommand(*p, argv, r.command_cwd, &r.operand_resolver, d, &allow_rule)) return d;
  }
  if (!d.clamps.empty()) {
    d.verdict = Verdict::kClamp;
    d.rule_id = std::move(clamp_rule);
  } else {
    d.verdict = Verdict::kAllow;
    d.rule_id = std::move(allow_rule);
  }
  return d;
}

absl::Status AddTemplateKwarg(PolicyRequest* request, absl::string_view key,
                              absl::string_view value_json) {
  if (key == "enable_thinking") {
    if (value_json != "true" && value_json != "false") {
      return absl::InvalidArgumentError("chat_template_kwargs.enable_thinking must be true or false");
    }
    request->params.Set(Param::kEnableThinking, value_json == "true" ? 1 : 0);
    return absl::OkStatus();
  }
  auto& keys = request->template_kwargs;
  keys.insert(std::lower_bound(keys.begin(), keys.end(), key), std::string(key));
  return absl::OkStatus();
}

void CompleteAsServed(PolicyRequest* request, uint32_t default_max_tokens) {
  request->defaults = ServingDefaults(default_max_tokens);
  if (request->offered_tools.empty()) {
    // Without tools a tool_choice means nothing (the router does not pass one on).
    request->params.Clear(Param::kToolChoice);
  } else if (!request->params.Has(Param::kToolChoice)) {
    request->params.Set(Param::kToolChoice, static_cast<double>(ToolChoice::kAuto));
  }
}

void ToProto(const Decision& decision, v1::PolicyDecision* out) {
  out->Clear();
  switch (decision.verdict) {
    case Verdict::kAllow:
      out->set_verdict(v1::VERDICT_ALLOW);
      break;
    case Verdict::kDeny:
      out->set_verdict(v1::VERDICT_DENY);
      break;
    case Verdict::kClamp:
      out->set_verdict(v1::VERDICT_CLAMP);
      break;
  }
  out->set_rule_id(decision.rule_id);
  out->set_policy_sha256(decision.policy_sha256);
  out->set_principal(decision.principal);
  out->set_reason(decision.reason);
  out->set_message(decision.message);
  for (const ClampRecord& c : decision.clamps) {
    v1::Clamp* clamp = out->add_clamps();
    clamp->set_field(c.field);
    clamp->set_requested(c.requested);
    clamp->set_applied(c.applied);
  }
}

}  // namespace gantry::policy
