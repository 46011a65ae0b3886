// The agent loop of one task (docs/tasks.md, "The loop"):
//
//   record task.started
//   repeat:
//     stop at max_turns, an exhausted token budget, or the wall-clock limit
//     reserve max_tokens = min(model.max_tokens_per_turn, tokens left); turn.requested
//     call the model through the router (a client like any other, as the harness's
//     service principal); settle the reservation with the reported usage
//     (turn.completed; the whole reservation stays charged when usage is unknown)
//     no tool calls: the final answer; evaluate acceptance; task.finished
//     each tool call: tool.proposed; count it against max_tool_calls BEFORE it runs;
//       authorize it against the manifest (tools.h); a refusal is tool.denied and goes
//       back to the model as an observation; an allowed call goes to the sandbox as a
//       gantry.v1.ToolCall, its ToolResult is tool.executed and goes back under the
//       same call id; max_consecutive_denials refusals in a row end the task
//   budget.warning at 50% and 80% of max_model_tokens and of max_tool_calls
//
// Every event is recorded (durably: EventSink::Record returns after the ledger flush)
// before it is acted on or shown. A failure to record ends the task at once.
//
// The loop talks to three interfaces so that it can be tested without processes:
// ModelClient (router_client.h implements it over HTTP), ToolExecutor (the sandbox
// over ZeroMQ, sandbox_client.h), EventSink (the ledger, task_commands.cc).
//
// Thread-safety: one AgentLoop runs one task on the calling thread.
#ifndef GANTRY_HARNESS_SVC_AGENT_LOOP_H_
#define GANTRY_HARNESS_SVC_AGENT_LOOP_H_

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/json.h"
#include "gantry/v1/tool.pb.h"
#include "harness-svc/acceptance.h"
#include "harness-svc/manifest.h"

namespace gantry::harness {

struct ModelToolCall {
  std::string id;
  std::string name;
  std::string arguments_json;
};

struct ModelReply {
  std::string request_id;       // the router's x-gantry-request-id (its ledger stream)
  std::string content;          // may be empty
  std::vector<ModelToolCall> tool_calls;
  std::string finish_reason;    // "stop", "length", "tool_calls"
  bool usage_known = false;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  std::string prompt_ids_sha256;   // the router's usage.gantry_prompt_ids_sha256, or ""
  std::string system_fingerprint;  // the bundle identity
  // Timings seen by the harness, in microseconds from sending the request; -1 unknown.
  int64_t first_token_us = -1;  // the first content, reasoning or tool-call delta
  int64_t response_us = -1;     // the whole response
};

class ModelClient {
 public:
  virtual ~ModelClient() = default;
  // `body` is an OpenAI chat-completions request. Errors carry the router's reason
  // (policy_denied, context_length_exceeded, ...) and are fatal to the task.
  virtual absl::StatusOr<ModelReply> Complete(const json::Value& body, int timeout_ms) = 0;
};

class ToolExecutor {
 public:
  virtual ~ToolExecutor() = default;
  // Errors: the sandbox could not be reached or answered nonsense (fatal to the task).
  virtual absl::StatusOr<v1::ToolResult> Execute(const v1::ToolCall& call, int timeout_ms) = 0;
};

class EventSink {
 public:
  virtual ~EventSink() = default;
  // Records one event of the task's stream durably, then shows it. Errors end the task.
  virtual absl::Status Record(const std::string& type, const json::Value& payload) = 0;
  // The sink of a child task's own stream (its task id), with the parent link
  // recorded where the sink keeps a task index. Default: delegation unsupported.
  virtual absl::StatusOr<std::unique_ptr<EventSink>> ForChildTask(const std::string& child_task_id,
                                                                  const std::string& goal) {
    (void)child_task_id;
    (void)goal;
    return absl::UnimplementedError("this sink cannot record child tasks");
  }
};

struct LoopOptions {
  std::string task_id;          // "task_<hex>"
  std::string parent_task_id;   // "" for a top-level task
  std::string principal = "harness";
  std::string workspace;        // resolved host path
  std::string manifest_sha256;  // of the manifest text, for the evidence
  // Bytes of a tool's output passed back to the model (the ledger keeps a hash of all).
  size_t max_observation_bytes = 32 << 10;
};

struct TaskOutcome {
  // "completed" (a final answer and every check passed), "acceptance_failed",
  // "budget_exhausted", "max_turns", "denial_limit", "error".
  std::string status;
  std::string reason;   // e.g. "max_model_tokens: 40 of 40 used", the router's error
  std::string answer;
  std::vector<CheckResult> acceptance;
  int64_t turns = 0;
  int64_t model_tokens = 0;     // completion tokens charged (the budgeted quantity)
  int64_t prompt_tokens = 0;    // reported, not budgeted
  int64_t tool_calls = 0;       // proposed calls counted against max_tool_calls
  int64_t denials = 0;
  std::set<std::string> files_read;
};

class AgentLoop {
 public:
  AgentLoop(const TaskManifest& manifest, LoopOptions options, ModelClient* model,
            ToolExecutor* tools, EventSink* sink);

  // Runs the task to its end. Errors only when an event could not be recorded (the
  // task then stops without task.finished); every other ending is a TaskOutcome.
  absl::StatusOr<TaskOutcome> Run();

 private:
  absl::Status Warn(const char* budget, int64_t used, int64_t limit, int* warned);
  // Runs a delegate_task call as a child task; fills the observation.
  absl::StatusOr<bool> Delegate(const ModelToolCall& call, TaskOutcome* out, std::string* observation);
  // Returns `observation` to the model under `call_id`; true (and the outcome set) when
  // that ends the task on the consecutive-denials limit.
  bool Observe(const std::string& call_id, const std::string& observation, json::Value* messages,
               TaskOutcome* out);
  absl::StatusOr<bool> HandleCall(const ModelToolCall& call, json::Value* messages, TaskOutcome* out);
  absl::Status Finish(TaskOutcome* out);
  int64_t WallLeftMs() const;

  const TaskManifest& manifest_;
  LoopOptions options_;
  ModelClient* model_;
  ToolExecutor* tools_;
  EventSink* sink_;
  int64_t start_ms_ = 0;
  int token_warnings_ = 0;
  int call_warnings_ = 0;
  int64_t consecutive_denials_ = 0;
  int64_t children_ = 0;
};

// The observation text the model receives for a ToolResult.
std::string Observation(const v1::ToolResult& result, size_t max_bytes);

}  // namespace gantry::harness

#endif  // GANTRY_HARNESS_SVC_AGENT_LOOP_H_
