#include "policy/policy_types.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace gantry::policy {
namespace {

constexpr const char* kParamNames[kParamCount] = {
    "max_tokens",   "temperature", "top_p",
    "top_k",        "seed",        "stop_strings",
    "tool_choice",  "parallel_tool_calls", "reasoning_effort",
    "enable_thinking",
};
constexpr const char* kToolChoiceNames[] = {"auto", "none", "required", "named"};
constexpr const char* kEffortNames[] = {"", "low", "medium", "high"};

}  // namespace

const char* ParamName(Param param) { return kParamNames[static_cast<int>(param)]; }

std::optional<Param> ParamFromName(absl::string_view name) {
  for (int i = 0; i < kParamCount; ++i) {
    if (name == kParamNames[i]) return static_cast<Param>(i);
  }
  return std::nullopt;
}

bool ParamIsIntegral(Param param) {
  return param != Param::kTemperature && param != Param::kTopP;
}

bool ParamIsFlag(Param param) {
  return param == Param::kParallelToolCalls || param == Param::kEnableThinking;
}

bool ParamNeedsGrant(Param param) { return param == Param::kEnableThinking; }

ParamValues ServingDefaults(uint32_t default_max_tokens) {
  ParamValues d;
  d.Set(Param::kMaxTokens, default_max_tokens);
  d.Set(Param::kTemperature, 0);  // greedy
  d.Set(Param::kTopP, 1);         // off
  d.Set(Param::kTopK, 0);         // off: every token (compared as unbounded)
  d.Set(Param::kStopStrings, 0);
  d.Set(Param::kToolChoice, static_cast<double>(ToolChoice::kAuto));
  d.Set(Param::kParallelToolCalls, 1);
  d.Set(Param::kReasoningEffort, static_cast<double>(ReasoningEffort::kMedium));
  d.Set(Param::kEnableThinking, 1);
  return d;
}

std::string FormatParamValue(Param param, double value) {
  switch (param) {
    case Param::kToolChoice:
      if (value >= 0 && value <= 3) return kToolChoiceNames[static_cast<int>(value)];
      break;
    case Param::kParallelToolCalls:
    case Param::kEnableThinking:
      return value != 0 ? "true" : "false";
    case Param::kReasoningEffort:
      if (value >= 1 && value <= 3) return kEffortNames[static_cast<int>(value)];
      break;
    default:
      break;
  }
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (value == std::floor(value) && std::fabs(value) < 1e18) {
    return absl::StrCat(static_cast<int64_t>(value));
  }
  return absl::StrCat(value);
}

absl::StatusOr<double> ParseParamValue(Param param, absl::string_view text) {
  switch (param) {
    case Param::kToolChoice:
      for (int i = 0; i < 4; ++i) {
        if (text == kToolChoiceNames[i]) return static_cast<double>(i);
      }
      return absl::InvalidArgumentError(
          absl::StrCat("tool_choice: expected auto, none, required or named, got '", text,
                       "'"));
    case Param::kParallelToolCalls:
    case Param::kEnableThinking:
      if (text == "true") return 1.0;
      if (text == "false") return 0.0;
      return absl::InvalidArgumentError(
          absl::StrCat(ParamName(param), ": expected true or false, got '", text, "'"));
    case Param::kReasoningEffort:
      for (int i = 1; i < 4; ++i) {
        if (text == kEffortNames[i]) return static_cast<double>(i);
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "reasoning_effort: expected low, medium or high, got '", text, "'"));
    case Param::kSeed: {
      // As the router carries a request's seed: a 64-bit unsigned value; a negative
      // one (-1, "random" to llama.cpp) wraps, as it does on the wire.
      int64_t signed_seed = 0;
      uint64_t seed = 0;
      if (absl::SimpleAtoi(text, &seed)) return static_cast<double>(seed);
      if (absl::SimpleAtoi(text, &signed_seed)) {
        return static_cast<double>(static_cast<uint64_t>(signed_seed));
      }
      return absl::InvalidArgumentError(
          absl::StrCat("seed: expected a whole number, got '", text, "'"));
    }
    default:
      break;
  }
  double value = 0;
  if (!absl::SimpleAtod(text, &value) || !std::isfinite(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat(ParamName(param), ": expected a number, got '", text, "'"));
  }
  if (ParamIsIntegral(param) && (value != std::floor(value) || value < 0 || value > 1e18)) {
    return absl::InvalidArgumentError(absl::StrCat(
        ParamName(param), ": expected a whole number >= 0, got '", text, "'"));
  }
  return value;
}

const char* PriorityName(Priority priority) {
  switch (priority) {
    case Priority::kInteractive:
      return "interactive";
    case Priority::kAccessibility:
      return "accessibility";
    case Priority::kBatch:
      return "batch";
  }
  return "interactive";
}

const char* PrincipalKindName(PrincipalKind kind) {
  return kind == PrincipalKind::kUser ? "user" : "service_account";
}

std::string FormatBudget(int64_t limit) {
  return IsUnlimited(limit) ? "unlimited" : absl::StrCat(limit);
}

const char* VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kAllow:
      return "allow";
    case Verdict::kDeny:
      return "deny";
    case Verdict::kClamp:
      return "clamp";
  }
  return "deny";
}

}  // namespace gantry::policy
