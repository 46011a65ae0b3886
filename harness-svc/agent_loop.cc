#include "harness-svc/agent_loop.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/ids.h"
#include "common/sha256.h"
#include "common/status.h"
#include "common/utf8.h"
#include "harness-svc/tools.h"

namespace gantry::harness {
namespace {

using json::Value;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Value Str(absl::string_view s) { return Value::String(std::string(s)); }
Value Int(int64_t i) { return Value::Int(i); }

// Text that is safe to put in JSON: invalid UTF-8 replaced, at most `max` bytes.
std::string Clip(absl::string_view bytes, size_t max) {
  std::string text = SanitizeUtf8(bytes.substr(0, max));
  if (bytes.size() > max) absl::StrAppend(&text, "\n[... ", bytes.size() - max, " more bytes not shown]");
  return text;
}

const char* OutcomeName(v1::ToolOutcome o) {
  switch (o) {
    case v1::TOOL_RAN: return "ran";
    case v1::TOOL_DENIED: return "denied";
    case v1::TOOL_TIMED_OUT: return "timed_out";
    case v1::TOOL_ERROR: return "error";
    default: return "unspecified";
  }
}

Value ToolCallsJson(const std::vector<ModelToolCall>& calls) {
  Value out = Value::EmptyArray();
  for (const auto& c : calls) {
    Value fn = Value::EmptyObject();
    fn.Set("name", Str(c.name));
    fn.Set("arguments", Str(c.arguments_json));
    Value call = Value::EmptyObject();
    call.Set("id", Str(c.id));
    call.Set("type", Str("function"));
    call.Set("function", std::move(fn));
    out.Append(std::move(call));
  }
  return out;
}

Value ToolMessage(const std::string& id, const std::string& content) {
  Value m = Value::EmptyObject();
  m.Set("role", Str("tool"));
  m.Set("tool_call_id", Str(id));
  m.Set("content", Str(content));
  return m;
}

}  // namespace

std::string Observation(const v1::ToolResult& r, size_t max_bytes) {
  switch (r.outcome()) {
    case v1::TOOL_RAN: {
      std::string text = Clip(r.stdout(), max_bytes);
      if (r.stdout_truncated()) absl::StrAppend(&text, "\n[output truncated by the sandbox]");
      if (r.exit_code() != 0 || r.term_signal() != 0) {
        absl::StrAppend(&text, text.empty() || text.back() == '\n' ? "" : "\n", "[exit status ",
                        r.exit_code(), r.term_signal() ? absl::StrCat(", signal ", r.term_signal()) : "",
                        "]\n", Clip(r.stderr(), max_bytes / 4));
      }
      return text;
    }
    case v1::TOOL_DENIED:
      return absl::StrCat("DENIED by the sandbox: ", Clip(r.denial_reason(), 1024),
                          ". Nothing ran. Choose another action within the task's permissions.");
    case v1::TOOL_TIMED_OUT:
      return absl::StrCat("TIMED OUT: the call was stopped at its wall-clock limit.\n",
                          Clip(r.stdout(), max_bytes / 2));
    default:
      return absl::StrCat("ERROR: the tool could not run: ", Clip(r.error().message(), 1024));
  }
}

AgentLoop::AgentLoop(const TaskManifest& manifest, LoopOptions options, ModelClient* model,
                     ToolExecutor* tools, EventSink* sink)
    : manifest_(manifest), options_(std::move(options)), model_(model), tools_(tools), sink_(sink) {}

int64_t AgentLoop::WallLeftMs() const {
  return manifest_.budget.max_wall_seconds * 1000 - (NowMs() - start_ms_);
}

absl::Status AgentLoop::Warn(const char* budget, int64_t used, int64_t limit, int* warned) {
  static constexpr int kThresholds[] = {50, 80};
  for (int i = *warned; i < 2; ++i) {
    if (limit <= 0 || used * 100 < kThresholds[i] * limit) break;
    Value p = Value::EmptyObject();
    p.Set("budget", Str(budget));
    p.Set("threshold_percent", Int(kThresholds[i]));
    p.Set("used", Int(used));
    p.Set("limit", Int(limit));
    GANTRY_RETURN_IF_ERROR(sink_->Record("budget.warning", p));
    *warned = i + 1;
  }
  return absl::OkStatus();
}

absl::StatusOr<TaskOutcome> AgentLoop::Run() {
  start_ms_ = NowMs();
  const Budget& budget = manifest_.budget;
  TaskOutcome out;
  {
    Value p = Value::EmptyObject();
    p.Set("gantry.task.id", Str(options_.task_id));
    if (!options_.parent_task_id.empty()) p.Set("gantry.task.parent_id", Str(options_.parent_task_id));
    p.Set("gantry.principal", Str(options_.principal));
    p.Set("gantry.task.manifest_sha256", Str(options_.manifest_sha256));
    if (!manifest_.name.empty()) p.Set("name", Str(manifest_.name));
    if (!manifest_.client_profile.empty()) p.Set("client_profile", Str(manifest_.client_profile));
    p.Set("goal", Str(manifest_.goal));
    p.Set("workspace", Str(options_.workspace));
    p.Set("gen_ai.request.model", Str(manifest_.model.name));
    Value tools = Value::EmptyArray();
    for (const auto& t : manifest_.tools) tools.Append(Str(t));
    p.Set("tools", tools);
    Value perm = Value::EmptyObject();
    Value read = Value::EmptyArray(), write = Value::EmptyArray();
    for (const auto& g : manifest_.permissions.fs_read) read.Append(Str(g));
    for (const auto& g : manifest_.permissions.fs_write) write.Append(Str(g));
    perm.Set("fs.read", read);
    perm.Set("fs.write", write);
    if (manifest_.permissions.has_exec) {
      Value ids = Value::EmptyArray();
      for (const auto& r : manifest_.permissions.exec.rules) ids.Append(Str(r.executable));
      perm.Set("process.exec.rules", ids);
    }
    perm.Set("network", Str("deny"));
    p.Set("permissions", perm);
    Value b = Value::EmptyObject();
    b.Set("max_model_tokens", Int(budget.max_model_tokens));
    b.Set("max_tool_calls", Int(budget.max_tool_calls));
    b.Set("max_turns", Int(budget.max_turns));
    b.Set("max_wall_seconds", Int(budget.max_wall_seconds));
    b.Set("max_consecutive_denials", Int(budget.max_consecutive_denials));
    p.Set("budget", b);
    GANTRY_RETURN_IF_ERROR(sink_->Record("task.started", p));
  }

  Value messages = Value::EmptyArray();
  if (!manifest_.system_prompt.empty()) {
    Value m = Value::EmptyObject();
    m.Set("role", Str("system"));
    m.Set("content", Str(manifest_.system_prompt));
    messages.Append(std::move(m));
  }
  {
    Value m = Value::EmptyObject();
    m.Set("role", Str("user"));
    m.Set("content", Str(manifest_.goal));
    messages.Append(std::move(m));
  }
  Value tool_schemas = Value::EmptyArray();
  for (const auto& t : manifest_.tools) tool_schemas.Append(ToolSchema(t));

  for (;;) {
    if (out.turns >= budget.max_turns) {
      out.status = "max_turns";
      out.reason = absl::StrCat("max_turns: ", out.turns, " of ", budget.max_turns, " used");
      break;
    }
    const int64_t tokens_left = budget.max_model_tokens - out.model_tokens;
    if (tokens_left <= 0) {
      out.status = "budget_exhausted";
      out.reason = absl::StrCat("max_model_tokens: ", out.model_tokens, " of ", budget.max_model_tokens, " used");
      break;
    }
    const int64_t wall_left = WallLeftMs();
    if (wall_left <= 0) {
      out.status = "budget_exhausted";
      out.reason = absl::StrCat("max_wall_seconds: ", budget.max_wall_seconds, " s elapsed");
      break;
    }
    // The reservation: this turn can never generate more than what is left.
    const int64_t reserve = std::min<int64_t>(manifest_.model.max_tokens_per_turn, tokens_left);
    const int64_t turn = ++out.turns;
    Value body = Value::EmptyObject();
    body.Set("model", Str(manifest_.model.name));
    body.Set("messages", messages);
    if (!manifest_.tools.empty()) body.Set("tools", tool_schemas);
    body.Set("max_tokens", Int(reserve));
    if (manifest_.model.has_temperature) body.Set("temperature", Value::Double(manifest_.model.temperature));
    {
      Value p = Value::EmptyObject();
      p.Set("turn", Int(turn));
      p.Set("max_tokens", Int(reserve));
      p.Set("tokens_used", Int(out.model_tokens));
      p.Set("tokens_left", Int(tokens_left));
      p.Set("messages", Int(static_cast<int64_t>(messages.items().size())));
      p.Set("gen_ai.request.model", Str(manifest_.model.name));
      p.Set("request_sha256", Str(Sha256Hex(json::DumpCompact(body))));
      GANTRY_RETURN_IF_ERROR(sink_->Record("turn.requested", p));
    }
    auto reply = model_->Complete(body, static_cast<int>(std::min<int64_t>(wall_left, 1 << 30)));
    if (!reply.ok()) {
      out.model_tokens += reserve;  // unknown usage: the reservation stays charged
      Value p = Value::EmptyObject();
      p.Set("turn", Int(turn));
      p.Set("error.type", Str(ReasonOf(reply.status()).empty() ? CodeName(reply.status().code())
                                                               : ReasonOf(reply.status())));
      p.Set("error.message", Str(Clip(reply.status().message(), 2048)));
      p.Set("tokens_charged", Int(reserve));
      p.Set("tokens_used", Int(out.model_tokens));
      GANTRY_RETURN_IF_ERROR(sink_->Record("turn.failed", p));
      out.status = "error";
      out.reason = absl::StrCat("model request failed: ", reply.status().message());
      break;
    }
    int64_t charged = reply->usage_known ? reply->completion_tokens : reserve;
    out.model_tokens += charged;
    out.prompt_tokens += reply->usage_known ? reply->prompt_tokens : 0;
    {
      Value p = Value::EmptyObject();
      p.Set("turn", Int(turn));
      p.Set("gantry.request_id", Str(reply->request_id));
      if (!reply->system_fingerprint.empty()) {
        p.Set("gantry.bundle.identity_sha256", Str(reply->system_fingerprint));
      }
      Value reasons = Value::EmptyArray();
      reasons.Append(Str(reply->finish_reason));
      p.Set("gen_ai.response.finish_reasons", reasons);
      p.Set("gen_ai.usage.input_tokens", Int(reply->prompt_tokens));
      if (!reply->prompt_ids_sha256.empty()) p.Set("gantry.prompt.ids_sha256", Str(reply->prompt_ids_sha256));
      p.Set("gen_ai.usage.output_tokens", Int(reply->completion_tokens));
      p.Set("usage_reported", Value::Bool(reply->usage_known));
      p.Set("tokens_charged", Int(charged));
      p.Set("tokens_reserved", Int(reserve));
      p.Set("tokens_used", Int(out.model_tokens));
      p.Set("tool_calls", Int(static_cast<int64_t>(reply->tool_calls.size())));
      // Streaming timings as the harness saw them (the router's stream), per turn.
      if (reply->first_token_us >= 0) p.Set("gantry.timings.first_token_us", Int(reply->first_token_us));
      if (reply->response_us >= 0) p.Set("gantry.timings.response_us", Int(reply->response_us));
      p.Set("content", Str(Clip(reply->content, 16 << 10)));
      GANTRY_RETURN_IF_ERROR(sink_->Record("turn.completed", p));
    }
    GANTRY_RETURN_IF_ERROR(Warn("max_model_tokens", out.model_tokens, budget.max_model_tokens, &token_warnings_));
    if (charged > reserve) {
      // The router generated past the cap it was given: never silently.
      out.status = "error";
      out.reason = absl::StrCat("the router reported ", charged, " tokens for a cap of ", reserve);
      break;
    }

    Value assistant = Value::EmptyObject();
    assistant.Set("role", Str("assistant"));
    assistant.Set("content", reply->content.empty() && !reply->tool_calls.empty() ? Value() : Str(reply->content));
    if (!reply->tool_calls.empty()) assistant.Set("tool_calls", ToolCallsJson(reply->tool_calls));
    messages.Append(std::move(assistant));

    if (reply->tool_calls.empty()) {
      if (reply->finish_reason == "length" && out.model_tokens >= budget.max_model_tokens) {
        out.status = "budget_exhausted";
        out.reason = absl::StrCat("max_model_tokens: ", out.model_tokens, " of ", budget.max_model_tokens,
                                  " used; the last answer was cut at the limit");
        out.answer = reply->content;
        break;
      }
      out.answer = reply->content;
      out.acceptance = EvaluateAcceptance(manifest_.acceptance, out.answer, out.files_read);
      bool passed = std::all_of(out.acceptance.begin(), out.acceptance.end(),
                                [](const CheckResult& c) { return c.passed; });
      out.status = passed ? "completed" : "acceptance_failed";
      out.reason = passed ? "final answer; acceptance holds" : "final answer; an acceptance check failed";
      break;
    }
    bool stop = false;
    for (const auto& call : reply->tool_calls) {
      auto s = HandleCall(call, &messages, &out);
      if (!s.ok()) return s.status();
      if (*s) {
        stop = true;
        break;
      }
    }
    if (stop) break;
  }
  GANTRY_RETURN_IF_ERROR(Finish(&out));
  return out;
}

absl::StatusOr<bool> AgentLoop::HandleCall(const ModelToolCall& call, Value* messages, TaskOutcome* out) {
  const Budget& budget = manifest_.budget;
  {
    Value p = Value::EmptyObject();
    p.Set("gen_ai.tool.call.id", Str(call.id));
    p.Set("gen_ai.tool.name", Str(call.name));
    p.Set("arguments", Str(Clip(call.arguments_json, 16 << 10)));
    p.Set("turn", Int(out->turns));
    GANTRY_RETURN_IF_ERROR(sink_->Record("tool.proposed", p));
  }
  auto deny = [&](const std::string& reason, const char* actor) -> absl::Status {
    ++out->denials;
    ++consecutive_denials_;
    Value p = Value::EmptyObject();
    p.Set("gen_ai.tool.call.id", Str(call.id));
    p.Set("gen_ai.tool.name", Str(call.name));
    p.Set("reason", Str(reason));
    p.Set("decided_by", Str(actor));
    p.Set("consecutive_denials", Int(consecutive_denials_));
    return sink_->Record("tool.denied", p);
  };
  // Counted before it runs: a call past the limit never runs.
  if (out->tool_calls >= budget.max_tool_calls) {
    GANTRY_RETURN_IF_ERROR(deny(absl::StrCat("budget:max_tool_calls: ", out->tool_calls, " of ",
                                             budget.max_tool_calls, " calls used"),
                                "harness"));
    out->status = "budget_exhausted";
    out->reason = absl::StrCat("max_tool_calls: ", out->tool_calls, " of ", budget.max_tool_calls, " used");
    return true;
  }
  ++out->tool_calls;
  GANTRY_RETURN_IF_ERROR(Warn("max_tool_calls", out->tool_calls, budget.max_tool_calls, &call_warnings_));

  if (call.name == "delegate_task") {
    std::string observation;
    auto stop = Delegate(call, out, &observation);
    if (!stop.ok() || *stop) return stop;
    return Observe(call.id, observation, messages, out);
  }
  Authorization auth = AuthorizeToolCall(manifest_, options_.workspace, options_.task_id, call.id,
                                         call.name, call.arguments_json);
  std::string observation;
  if (!auth.allowed) {
    GANTRY_RETURN_IF_ERROR(deny(auth.reason, "harness"));
    observation = absl::StrCat("DENIED by the harness: ", auth.reason,
                               ". This call did not run. Choose another action within the task's permissions.");
  } else {
    const int64_t wall_left = WallLeftMs();
    if (wall_left <= 0) {
      GANTRY_RETURN_IF_ERROR(deny("budget:max_wall_seconds: no time left to run the call", "harness"));
      out->status = "budget_exhausted";
      out->reason = absl::StrCat("max_wall_seconds: ", budget.max_wall_seconds, " s elapsed");
      return true;
    }
    v1::ToolCall tc = auth.call;
    tc.mutable_limits()->set_wall_ms(
        static_cast<uint32_t>(std::min<int64_t>(tc.limits().wall_ms(), wall_left)));
    auto result = tools_->Execute(tc, static_cast<int>(tc.limits().wall_ms()) + 10000);
    Value p = Value::EmptyObject();
    p.Set("gen_ai.tool.call.id", Str(call.id));
    p.Set("gen_ai.tool.name", Str(call.name));
    if (!auth.path.empty() || call.name != "exec") p.Set("path", Str(auth.path));
    if (!result.ok()) {
      // PERMISSION_DENIED: the service refused this harness or the task's workspace
      // (sandbox_client.h); no later call could run either.
      const bool refused = result.status().code() == absl::StatusCode::kPermissionDenied;
      p.Set("outcome", Str(refused ? "refused" : "unavailable"));
      if (refused) p.Set("error.reason", Str(ReasonOf(result.status())));
      p.Set("error.message", Str(Clip(result.status().message(), 2048)));
      GANTRY_RETURN_IF_ERROR(sink_->Record("tool.executed", p));
      out->status = "error";
      out->reason = refused ? absl::StrCat("the sandbox refused the task: ", ReasonOf(result.status()),
                                           ": ", result.status().message())
                            : absl::StrCat("the sandbox did not answer: ", result.status().message());
      return true;
    }
    const v1::ToolResult& r = *result;
    p.Set("outcome", Str(OutcomeName(r.outcome())));
    p.Set("exit_code", Int(r.exit_code()));
    if (r.term_signal()) p.Set("term_signal", Int(r.term_signal()));
    p.Set("stdout_bytes", Int(static_cast<int64_t>(r.stdout().size())));
    p.Set("stdout_sha256", Str(Sha256Hex(r.stdout())));
    p.Set("stderr_bytes", Int(static_cast<int64_t>(r.stderr().size())));
    p.Set("stdout_truncated", Value::Bool(r.stdout_truncated()));
    p.Set("wall_us", Int(static_cast<int64_t>(r.usage().wall_us())));
    if (!r.resolved_executable().empty()) p.Set("resolved_executable", Str(r.resolved_executable()));
    if (!r.denial_reason().empty()) p.Set("denial_reason", Str(Clip(r.denial_reason(), 1024)));
    // Every exec the sandbox's supervisor decided: which program, the verdict and rule.
    if (r.execs_decided() > 0) {
      p.Set("execs_decided", Int(static_cast<int64_t>(r.execs_decided())));
      p.Set("execs_denied", Int(static_cast<int64_t>(r.execs_denied())));
      Value execs = Value::EmptyArray();
      for (const auto& e : r.execs()) {
        Value x = Value::EmptyObject();
        x.Set("executable", Str(e.executable()));
        x.Set("allowed", Value::Bool(e.allowed()));
        x.Set("rule_id", Str(e.rule_id()));
        execs.Append(std::move(x));
      }
      p.Set("execs", std::move(execs));
    }
    if (r.outcome() == v1::TOOL_ERROR) p.Set("error.message", Str(Clip(r.error().message(), 1024)));
    observation = Observation(r, options_.max_observation_bytes);
    p.Set("observation", Str(Clip(observation, 8 << 10)));
    GANTRY_RETURN_IF_ERROR(sink_->Record("tool.executed", p));
    if (r.outcome() == v1::TOOL_DENIED) {
      ++out->denials;
      ++consecutive_denials_;
    } else {
      consecutive_denials_ = 0;
    }
    if (call.name == "read_file" && r.outcome() == v1::TOOL_RAN && r.exit_code() == 0) {
      out->files_read.insert(auth.path);
    }
  }
  return Observe(call.id, observation, messages, out);
}

bool AgentLoop::Observe(const std::string& call_id, const std::string& observation, Value* messages,
                        TaskOutcome* out) {
  const Budget& budget = manifest_.budget;
  messages->Append(ToolMessage(call_id, observation));
  if (consecutive_denials_ >= budget.max_consecutive_denials) {
    out->status = "denial_limit";
    out->reason = absl::StrCat(consecutive_denials_, " consecutive denials (max_consecutive_denials ",
                               budget.max_consecutive_denials, ")");
    return true;
  }
  return false;
}

absl::StatusOr<bool> AgentLoop::Delegate(const ModelToolCall& call, TaskOutcome* out, std::string* observation) {
  const Budget& budget = manifest_.budget;
  auto deny = [&](const std::string& reason) -> absl::Status {
    ++out->denials;
    ++consecutive_denials_;
    Value p = Value::EmptyObject();
    p.Set("gen_ai.tool.call.id", Str(call.id));
    p.Set("gen_ai.tool.name", Str(call.name));
    p.Set("reason", Str(reason));
    p.Set("decided_by", Str("harness"));
    p.Set("consecutive_denials", Int(consecutive_denials_));
    *observation = absl::StrCat("DENIED by the harness: ", reason,
                                ". No child task was started. Choose another action within the task's permissions.");
    return sink_->Record("tool.denied", p);
  };
  bool advertised = false;
  for (const auto& t : manifest_.tools) advertised = advertised || t == "delegate_task";
  if (!advertised) {
    GANTRY_RETURN_IF_ERROR(deny("invalid_arguments: 'delegate_task' is not an advertised tool"));
    return false;
  }
  if (children_ >= budget.max_children) {
    GANTRY_RETURN_IF_ERROR(deny(absl::StrCat("budget:max_children: ", children_, " of ", budget.max_children,
                                             " child tasks started")));
    return false;
  }
  auto child = NarrowForChild(manifest_, call.arguments_json, budget.max_model_tokens - out->model_tokens,
                              budget.max_tool_calls - out->tool_calls, WallLeftMs() / 1000);
  if (!child.ok()) {
    GANTRY_RETURN_IF_ERROR(deny(std::string(child.status().message())));
    return false;
  }
  ++children_;
  const std::string child_id = NewId("task");
  {
    Value p = Value::EmptyObject();
    p.Set("gen_ai.tool.call.id", Str(call.id));
    p.Set("gantry.task.child_id", Str(child_id));
    p.Set("goal", Str(child->goal));
    Value tools = Value::EmptyArray();
    for (const auto& t : child->tools) tools.Append(Str(t));
    p.Set("tools", tools);
    Value read = Value::EmptyArray();
    for (const auto& g : child->permissions.fs_read) read.Append(Str(g));
    p.Set("fs.read", read);
    p.Set("max_model_tokens", Int(child->budget.max_model_tokens));
    p.Set("max_tool_calls", Int(child->budget.max_tool_calls));
    p.Set("max_turns", Int(child->budget.max_turns));
    GANTRY_RETURN_IF_ERROR(sink_->Record("task.delegated", p));
  }
  auto child_sink = sink_->ForChildTask(child_id, child->goal);
  if (!child_sink.ok()) return child_sink.status();
  LoopOptions o = options_;
  o.task_id = child_id;
  o.parent_task_id = options_.task_id;
  AgentLoop loop(*child, o, model_, tools_, child_sink->get());
  auto result = loop.Run();
  if (!result.ok()) return result.status();
  // The child's usage is the parent's: it was carved out of what the parent had left.
  out->model_tokens += result->model_tokens;
  out->prompt_tokens += result->prompt_tokens;
  out->tool_calls += result->tool_calls;
  consecutive_denials_ = 0;
  *observation = absl::StrCat("CHILD REPORT ", child_id, ": ", result->status, " (", result->reason, ")\n",
                              Clip(result->answer, options_.max_observation_bytes));
  Value p = Value::EmptyObject();
  p.Set("gen_ai.tool.call.id", Str(call.id));
  p.Set("gen_ai.tool.name", Str(call.name));
  p.Set("outcome", Str(absl::StrCat("child_", result->status)));
  p.Set("gantry.task.child_id", Str(child_id));
  p.Set("child_model_tokens", Int(result->model_tokens));
  p.Set("child_tool_calls", Int(result->tool_calls));
  p.Set("tokens_used", Int(out->model_tokens));
  p.Set("observation", Str(Clip(*observation, 8 << 10)));
  GANTRY_RETURN_IF_ERROR(sink_->Record("tool.executed", p));
  GANTRY_RETURN_IF_ERROR(Warn("max_model_tokens", out->model_tokens, budget.max_model_tokens, &token_warnings_));
  GANTRY_RETURN_IF_ERROR(Warn("max_tool_calls", out->tool_calls, budget.max_tool_calls, &call_warnings_));
  return false;
}

absl::Status AgentLoop::Finish(TaskOutcome* out) {
  Value p = Value::EmptyObject();
  p.Set("status", Str(out->status));
  p.Set("reason", Str(out->reason));
  p.Set("answer", Str(Clip(out->answer, 64 << 10)));
  Value checks = Value::EmptyArray();
  for (const auto& c : out->acceptance) {
    Value v = Value::EmptyObject();
    v.Set("check", Str(c.check));
    v.Set("passed", Value::Bool(c.passed));
    v.Set("detail", Str(c.detail));
    checks.Append(std::move(v));
  }
  p.Set("acceptance", checks);
  p.Set("turns", Int(out->turns));
  p.Set("model_tokens_used", Int(out->model_tokens));
  p.Set("max_model_tokens", Int(manifest_.budget.max_model_tokens));
  p.Set("gen_ai.usage.input_tokens", Int(out->prompt_tokens));
  p.Set("gen_ai.usage.output_tokens", Int(out->model_tokens));
  p.Set("tool_calls", Int(out->tool_calls));
  p.Set("denials", Int(out->denials));
  Value read = Value::EmptyArray();
  for (const auto& f : out->files_read) read.Append(Str(f));
  p.Set("files_read", read);
  p.Set("wall_ms", Int(NowMs() - start_ms_));
  return sink_->Record("task.finished", p);
}

}  // namespace gantry::harness
