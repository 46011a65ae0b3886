// The compiled access policy: an immutable Snapshot built once from policy YAML by
// policy_loader.h and read by any number of threads through
// std::shared_ptr<const Snapshot>.
//
// Compilation resolves, for every user and service account, the effective grant that
// results from its own grants and its groups' grants (the combination rule is in
// docs/policy.md, "How grants combine"), so a decision is a few hash lookups.
//
// Thread-safety: a Snapshot is never modified after the loader returns it; all reads
// are safe from any thread.
#ifndef GANTRY_POLICY_POLICY_TYPES_H_
#define GANTRY_POLICY_POLICY_TYPES_H_

#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gantry::policy {

// Request parameters a grant can bound, in decision order. Every value is carried as a
// double: integer parameters are whole numbers, enumerations are ordinals (see below).
enum class Param : uint8_t {
  kMaxTokens = 0,
  kTemperature,
  kTopP,
  kTopK,
  kSeed,
  kStopStrings,        // the number of stop strings
  kToolChoice,         // ordinal of ToolChoice
  kParallelToolCalls,  // 0 false, 1 true
  kReasoningEffort,    // ordinal of ReasoningEffort
  kEnableThinking,     // 0 false, 1 true: chat_template_kwargs.enable_thinking
};
constexpr int kParamCount = 10;

// tool_choice ordinals. A grant bounds tool_choice by a set (bit 1 << ordinal).
enum class ToolChoice : uint8_t { kAuto = 0, kNone = 1, kRequired = 2, kNamed = 3 };
// reasoning_effort ordinals, ordered so that a grant can cap it ("max: medium").
enum class ReasoningEffort : uint8_t { kLow = 1, kMedium = 2, kHigh = 3 };

// The YAML / CLI name of a parameter ("max_tokens"). Never null.
const char* ParamName(Param param);
// The parameter of that name, or nullopt.
std::optional<Param> ParamFromName(absl::string_view name);
// Whether values of `param` must be whole numbers (integers and enumerations).
bool ParamIsIntegral(Param param);
// Whether `param` is a true/false flag bounded by {allowed: true|false}.
bool ParamIsFlag(Param param);
// Whether a request may set `param` only when a grant bounds it (the template kwarg
// enable_thinking: a template variable is granted, never passed through by default).
bool ParamNeedsGrant(Param param);

// Text of a value for messages and clamp records: "4096", "0.7", "medium", "false".
std::string FormatParamValue(Param param, double value);
// Parses a parameter value as written in YAML examples and on the command line:
// numbers for numeric parameters, auto|none|required|named, true|false,
// low|medium|high. Errors: INVALID_ARGUMENT saying what was expected.
absl::StatusOr<double> ParseParamValue(Param param, absl::string_view text);

// A request parameter set: value[i] is meaningful when bit i of `present` is set.
struct ParamValues {
  std::array<double, kParamCount> value{};
  uint32_t present = 0;

  bool Has(Param p) const { return present & (1u << static_cast<int>(p)); }
  double Get(Param p) const { return value[static_cast<int>(p)]; }
  void Set(Param p, double v) {
    value[static_cast<int>(p)] = v;
    present |= 1u << static_cast<int>(p);
  }
  void Clear(Param p) { present &= ~(1u << static_cast<int>(p)); }
};

// The values a worker uses for parameters a request omits (what "unset" means on the
// worker protocol), given the bundle's default output cap. The router passes them as
// PolicyRequest::defaults so that an omitted parameter is checked as the value that
// will be used; `gantry policy explain` passes the same. Seed has none (the worker
// draws one); reasoning_effort "medium" and enable_thinking true are what templates
// that read them assume when unset, and the router sends them explicitly whenever a
// grant bounds them.
ParamValues ServingDefaults(uint32_t default_max_tokens);
// The output cap of a model whose catalog entry and bundle name none.
constexpr uint32_t kDefaultMaxTokens = 1024;

enum class BoundAction : uint8_t { kReject, kClamp };
enum class Priority : uint8_t { kInteractive, kAccessibility, kBatch };
enum class PrincipalKind : uint8_t { kUser, kServiceAccount };

const char* PriorityName(Priority priority);
const char* PrincipalKindName(PrincipalKind kind);

constexpr double kNoMin = -std::numeric_limits<double>::infinity();
constexpr double kNoMax = std::numeric_limits<double>::infinity();
constexpr uint32_t kAllChoices = 0xF;

// One grant's bound on one parameter of one model.
struct GrantBound {
  std::string rule_id;  // "grants[1].models.qwen3-8b.temperature"
  double min = kNoMin;
  double max = kNoMax;
  uint32_t allowed_mask = kAllChoices;  // tool_choice only
  BoundAction action = BoundAction::kReject;
};

// All bounds on one parameter of one model for one principal: a request must satisfy
// every part; [lo, hi] and mask are their intersection (the clamp target).
struct ParamRule {
  std::vector<GrantBound> parts;
  double lo = kNoMin;
  double hi = kNoMax;
  uint32_t mask = kAllChoices;
};

struct ModelAccess {
  std::string grant_rule;  // first grant naming the model; "" when only denied
  std::string deny_rule;   // non-empty: an explicit deny, which always wins
  std::array<ParamRule, kParamCount> params;
};

// A constraint on one named argument of a tool call. The argument must be present and
// its value must match one of `globs` (path globs) and/or be one of `one_of`.
struct ArgConstraint {
  std::string rule_id;  // "grants[0].tools.read_file.args.path"
  std::string arg;
  std::vector<std::string> globs;
  std::vector<std::string> one_of;
};

// What one grant says about one tool: every constraint must hold.
struct ToolGrant {
  std::string rule_id;  // "grants[0].tools.read_file"
  std::vector<ArgConstraint> args;
};

struct ToolAccess {
  std::vector<ToolGrant> grants;  // all must accept (AND)
  std::string deny_rule;
};

// An executable-aware command rule: matched against an argv vector whose argv[0] is the
// resolved absolute path of the executable.
struct CommandRule {
  std::string rule_id;  // "grants[2].commands[0]"
  std::string executable;
  std::vector<std::string> subcommands;  // non-empty: argv[1] must be one of them
  bool has_allowed_flags = false;
  std::vector<std::string> allowed_flags;    // with has_allowed_flags: only these
  std::vector<std::string> forbidden_flags;  // never these
  std::vector<std::string> operand_globs;    // non-empty: every operand must match one
  int64_t max_args = -1;                     // >= 0: at most this many after argv[0]
};

// What one grant says about one executable: any of its rules may accept (OR).
struct CommandGrant {
  std::vector<CommandRule> rules;
};

struct CommandAccess {
  std::vector<CommandGrant> grants;  // all must accept (AND)
  std::string deny_rule;
};

// Limits enforced by admission (router/), carried in the decision. Every principal
// gets the policy defaults, narrowed by its grants (the minimum of all of them).
//
// The four counted limits (tokens_per_day, tokens_per_month, requests_per_minute,
// concurrent_requests) mean what they say: N admits up to N, and 0 admits nothing.
// No limit exists only where the policy spells it out as `unlimited`, which is
// kUnlimited here: the largest int64_t, above any number a policy can write (at most
// 2^53), so that the minimum over defaults and grants needs no special case (unlimited
// combined with N is N). Test a limit with IsUnlimited(), never with `> 0`, and never
// do arithmetic on kUnlimited (it is a marker, not a count). A default-constructed
// Budgets is all 0: a decision whose budgets nobody filled in admits nothing.
constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max();
constexpr bool IsUnlimited(int64_t limit) { return limit == kUnlimited; }
// "unlimited" for kUnlimited, else the number ("0", "1000"): for messages and
// `gantry policy explain`.
std::string FormatBudget(int64_t limit);

// defaults.budgets.request_seconds when the policy does not set it: 30 minutes, long
// enough for a full-length answer from a slow CPU model. request_seconds is always a
// number from 1 to a year; it is never unlimited.
constexpr int64_t kDefaultRequestSeconds = 1800;

struct Budgets {
  int64_t tokens_per_day = 0;       // or kUnlimited
  int64_t tokens_per_month = 0;     // or kUnlimited
  int64_t requests_per_minute = 0;  // or kUnlimited
  int64_t concurrent_requests = 0;  // or kUnlimited
  // The longest one request may take, from its arrival at the router to its last event
  // (queued time included); the router turns it into the request's deadline_unix_ms.
  int64_t request_seconds = kDefaultRequestSeconds;
};

struct Principal {
  std::string name;
  PrincipalKind kind = PrincipalKind::kUser;
  Priority priority = Priority::kInteractive;
  std::string key_sha256;
  std::vector<std::string> groups;
  // Special-token text in this principal's content may become control tokens (off:
  // it is tokenized as text). For trusted tooling that sends pre-rendered turns.
  bool special_tokens_in_content = false;
  absl::flat_hash_map<std::string, ModelAccess> models;
  absl::flat_hash_map<std::string, ToolAccess> tools;
  absl::flat_hash_map<std::string, CommandAccess> commands;  // by executable path
  Budgets budgets;
};


// One tool call: a call the model emitted (the router builds it with ToolCallFromJson,
// policy_decide.h, from the call's arguments JSON) or one asked about in an example or
// by `gantry policy explain`.
struct ToolCallRequest {
  std::string name;
  // Top-level arguments: name -> value. A string argument's value is its text; any
  // other JSON value is its compact JSON text and its name is in `non_string_args`.
  std::vector<std::pair<std::string, std::string>> args;
  std::vector<std::string> non_string_args;
  // Non-empty: the arguments are not one JSON object with distinct keys (why); the
  // call is then denied whatever the grant says.
  std::string malformed;
};

// How a command's operand reads in the file system it will run in (PolicyRequest::
// operand_resolver): `real` is the path the program reaches, every symlink followed
// ("" when there is nothing to check beyond the lexical path); a non-empty `denial`
// denies the operand whatever the globs say (a dangling symlink).
struct OperandPath {
  std::string real;
  std::string denial;
};
// Called with PolicyRequest::command_cwd and an operand as written.
using OperandResolver =
    std::function<OperandPath(absl::string_view cwd, absl::string_view operand)>;

// What is asked. Identify the principal by `api_key` (the presented bearer key; it is
// hashed and looked up) or, when api_key is empty, by `principal` (a user or service
// account name, for callers that authenticated already). `model` may be empty for a
// tools/commands-only check (the sandbox asking about one argv).
struct PolicyRequest {
  std::string api_key;
  std::string principal;
  std::string model;
  ParamValues params;
  // The tools the request offers the model (`tools` of chat completions and the
  // Responses API), by name, in request order; and the tool tool_choice names
  // (params kToolChoice = named). Checked by name against the grants, then stripped or
  // refused as Snapshot::advertised_tools says.
  std::vector<std::string> offered_tools;
  std::string tool_choice_name;
  // What the parameters the request omits will be (ServingDefaults). An omitted
  // parameter that a grant bounds is checked as its default; one without a default
  // (seed, or any parameter when `defaults` is empty) is set to the bound's max, else
  // its min, and recorded as a clamp from "unset".
  ParamValues defaults;
  // chat_template_kwargs keys that are not a parameter: refused unless granted, and no
  // grant can grant one (template_kwarg_not_granted).
  std::vector<std::string> template_kwargs;
  // Tool calls: each is decided in full (name, then arguments).
  std::vector<ToolCallRequest> tools;
  std::vector<std::vector<std::string>> commands;
  // The working directory of `commands` (absolute; the sandbox passes it). When set, a
  // relative operand is matched against `operands` globs as command_cwd/operand,
  // cleaned lexically (path_glob.h, AbsoluteCleanPath); when empty, as written.
  std::string command_cwd;
  // The file system the commands run in, for `operands` globs (set by the sandbox; empty
  // in `gantry policy explain`: operands are then matched lexically only). Asked about
  // each operand whose lexical path matched; the real path it returns must match too.
  OperandResolver operand_resolver;
};

enum class Verdict : uint8_t { kAllow, kDeny, kClamp };
const char* VerdictName(Verdict verdict);  // "allow", "deny", "clamp"

struct ClampRecord {
  std::string field;      // "max_tokens"
  std::string requested;  // "99999", or "unset" when the request omitted it
  std::string applied;    // "4096"
};

// What the policy said about one offered tool.
struct OfferedToolVerdict {
  std::string name;
  bool granted = false;
  // granted: the first grant naming the tool ("grants[0].tools.read_file"); else the
  // rule that refuses it ("default_deny", "grants[3].deny.tools[0]").
  std::string rule_id;
};

struct Decision {
  Verdict verdict = Verdict::kDeny;
  std::string rule_id;        // the rule that decided
  std::string policy_sha256;  // the snapshot that decided
  std::string principal;      // resolved name; "" when unknown
  // Stable reason: "" when allowed; model_not_granted, unknown_model,
  // parameter_out_of_range, parameter_not_granted, template_kwarg_not_granted,
  // tool_not_granted, tool_arguments_not_allowed,
  // command_not_granted, command_arguments_not_allowed, unknown_principal,
  // invalid_request.
  std::string reason;
  std::string message;  // for humans
  std::vector<ClampRecord> clamps;
  // The parameters to use: the request's, or the defaults of the bounded ones it
  // omitted, after clamping. A caller sends every value present here.
  ParamValues effective;
  // Every offered tool, in request order, with its verdict (filled up to the denial
  // when the decision denies), and the names removed under advertised_tools: strip.
  std::vector<OfferedToolVerdict> offered_tools;
  std::vector<std::string> stripped_tools;
  Priority priority = Priority::kInteractive;
  Budgets budgets;
  bool special_tokens_in_content = false;  // the principal's setting
};

// An inline example: a request and what the policy must decide for it.
struct Example {
  std::string where;  // "policy.yaml:120:5 examples[3]"
  enum class Expect : uint8_t { kAllow, kDeny, kClamp } expect = Expect::kAllow;
  PolicyRequest request;
  std::string reason;                                   // optional expectation
  std::string rule;                                     // optional expectation
  std::vector<std::pair<std::string, std::string>> clamps;  // field -> applied
};

struct ModelInfo {
  std::string name;
  std::vector<std::string> bundles;
};

// What the router does with the tools a request offers the model that the principal is
// not granted (by name): strip them from the request (the default) or refuse the
// request. There is no mode that passes them on: a principal offers only granted tools.
enum class AdvertisedTools : uint8_t { kStrip, kReject };

struct Snapshot {
  std::string sha256;  // SHA-256 of the policy file's bytes
  std::string source;  // the file name used in messages
  std::vector<Principal> principals;
  absl::flat_hash_map<std::string, int> by_name;        // user/service account name
  absl::flat_hash_map<std::string, int> by_key_sha256;  // lowercase hex
  absl::flat_hash_map<std::string, ModelInfo> models;
  std::vector<std::string> groups;
  Budgets defaults;
  AdvertisedTools advertised_tools = AdvertisedTools::kStrip;
  std::vector<Example> examples;
};

}  // namespace gantry::policy

#endif  // GANTRY_POLICY_POLICY_TYPES_H_
