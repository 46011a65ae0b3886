#include "harness-svc/agent_loop.h"

#include <deque>

#include "gtest/gtest.h"

namespace gantry::harness {
namespace {

struct FakeModel : ModelClient {
  std::deque<absl::StatusOr<ModelReply>> replies;
  std::vector<json::Value> requests;
  absl::StatusOr<ModelReply> Complete(const json::Value& body, int) override {
    requests.push_back(body);
    if (replies.empty()) return absl::InternalError("no scripted reply");
    auto r = replies.front();
    replies.pop_front();
    return r;
  }
};

struct FakeTools : ToolExecutor {
  std::vector<v1::ToolCall> calls;
  absl::StatusOr<v1::ToolResult> Execute(const v1::ToolCall& call, int) override {
    calls.push_back(call);
    v1::ToolResult r;
    r.set_call_id(call.call_id());
    r.set_outcome(v1::TOOL_RAN);
    r.set_stdout("contents of " + call.read_file().path() + "\n");
    return r;
  }
};

struct Sink : EventSink {
  std::vector<std::pair<std::string, json::Value>> events;
  std::vector<std::pair<std::string, json::Value>>* shared = nullptr;  // a child writes here too
  std::string prefix;
  int fail_at = -1;
  absl::StatusOr<std::unique_ptr<EventSink>> ForChildTask(const std::string& id, const std::string&) override {
    auto child = std::make_unique<Sink>();
    child->shared = shared ? shared : &events;
    child->prefix = "child:";
    return std::unique_ptr<EventSink>(std::move(child));
  }
  absl::Status Record(const std::string& type, const json::Value& payload) override {
    if (static_cast<int>(events.size()) == fail_at) return absl::DataLossError("spool full");
    (shared ? *shared : events).emplace_back(prefix + type, payload);
    return absl::OkStatus();
  }
  std::vector<std::string> Types() const {
    std::vector<std::string> t;
    for (const auto& e : events) t.push_back(e.first);
    return t;
  }
  int Count(const std::string& type) const {
    int n = 0;
    for (const auto& e : events) n += e.first == type;
    return n;
  }
};

ModelReply Answer(const std::string& text, int64_t tokens, const std::string& finish = "stop") {
  ModelReply r;
  r.request_id = "req_x";
  r.content = text;
  r.finish_reason = finish;
  r.usage_known = true;
  r.prompt_tokens = 100;
  r.completion_tokens = tokens;
  return r;
}

ModelReply Call(const std::string& id, const std::string& name, const std::string& args, int64_t tokens) {
  ModelReply r = Answer("", tokens, "tool_calls");
  r.tool_calls.push_back({id, name, args});
  return r;
}

TaskManifest Manifest() {
  TaskManifest m;
  m.goal = "Summarise";
  m.model.name = "gantry-demo";
  m.model.max_tokens_per_turn = 64;
  m.tools = {"read_file", "exec"};
  m.permissions.fs_read = {"README.md", "src/**"};
  m.permissions.has_exec = true;
  m.budget.max_model_tokens = 1000;
  m.budget.max_tool_calls = 10;
  m.budget.max_turns = 10;
  m.budget.max_wall_seconds = 60;
  AcceptanceCheck c;
  c.kind = AcceptanceCheck::Kind::kCitedFilesWereRead;
  m.acceptance.push_back(c);
  return m;
}

struct Fixture {
  TaskManifest manifest = Manifest();
  FakeModel model;
  FakeTools tools;
  Sink sink;
  absl::StatusOr<TaskOutcome> Run() {
    LoopOptions o;
    o.task_id = "task_000000000000000000000001";
    o.workspace = "/tmp";
    AgentLoop loop(manifest, o, &model, &tools, &sink);
    return loop.Run();
  }
};

TEST(AgentLoop, FinalAnswerAtOnce) {
  Fixture f;
  f.model.replies.push_back(Answer("Nothing cited.", 5));
  auto out = f.Run();
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->status, "completed");
  EXPECT_EQ(f.sink.Types(), (std::vector<std::string>{"task.started", "turn.requested", "turn.completed",
                                                       "task.finished"}));
  EXPECT_EQ(*f.model.requests[0].Find("max_tokens")->as_int64(), 64);
  EXPECT_EQ(f.model.requests[0].Find("tools")->items().size(), 2u);
}

TEST(AgentLoop, TurnTimingsAreRecordedWhenKnown) {
  Fixture f;
  ModelReply timed = Call("call_a", "read_file", R"({"path": "README.md"})", 5);
  timed.first_token_us = 1234;
  timed.response_us = 5678;
  f.model.replies.push_back(timed);
  f.model.replies.push_back(Answer("done", 5));  // timings unknown: not recorded
  ASSERT_TRUE(f.Run().ok());
  std::vector<const json::Value*> turns;
  for (const auto& [type, payload] : f.sink.events) {
    if (type == "turn.completed") turns.push_back(&payload);
  }
  ASSERT_EQ(turns.size(), 2u);
  ASSERT_NE(turns[0]->Find("gantry.timings.first_token_us"), nullptr);
  EXPECT_EQ(*turns[0]->Find("gantry.timings.first_token_us")->as_int64(), 1234);
  EXPECT_EQ(*turns[0]->Find("gantry.timings.response_us")->as_int64(), 5678);
  EXPECT_EQ(turns[1]->Find("gantry.timings.first_token_us"), nullptr);
}

TEST(AgentLoop, ToolResultReturnsUnderTheSameCallId) {
  Fixture f;
  f.model.replies.push_back(Call("call_a", "read_file", R"({"path": "README.md"})", 20));
  f.model.replies.push_back(Answer("- README.md says hello", 8));
  auto out = f.Run();
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->status, "completed") << out->reason;
  ASSERT_EQ(f.tools.calls.size(), 1u);
  EXPECT_EQ(f.tools.calls[0].call_id(), "call_a");
  EXPECT_EQ(f.tools.calls[0].task_id(), "task_000000000000000000000001");
  const auto& msgs = f.model.requests[1].Find("messages")->items();
  ASSERT_EQ(msgs.size(), 3u);
  EXPECT_EQ(msgs[1].Find("tool_calls")->items()[0].Find("id")->as_string(), "call_a");
  EXPECT_EQ(msgs[2].Find("role")->as_string(), "tool");
  EXPECT_EQ(msgs[2].Find("tool_call_id")->as_string(), "call_a");
  EXPECT_EQ(msgs[2].Find("content")->as_string(), "contents of README.md\n");
  EXPECT_EQ(out->files_read, std::set<std::string>{"README.md"});
  EXPECT_EQ(out->model_tokens, 28);
  // Events come before their effects: proposed, then executed, then the next turn.
  EXPECT_EQ(f.sink.Types(), (std::vector<std::string>{"task.started", "turn.requested", "turn.completed",
                                                       "tool.proposed", "tool.executed", "turn.requested",
                                                       "turn.completed", "task.finished"}));
}

TEST(AgentLoop, DenialIsAnObservationTheModelRecoversFrom) {
  Fixture f;
  f.model.replies.push_back(Call("call_a", "exec", R"({"argv": ["rm", "-rf", "src"]})", 10));
  f.model.replies.push_back(Call("call_b", "read_file", R"({"path": "src/main.c"})", 10));
  f.model.replies.push_back(Answer("src/main.c is the entry point", 6));
  auto out = f.Run();
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->status, "completed") << out->reason;
  EXPECT_EQ(f.tools.calls.size(), 1u) << "the denied call never reached the sandbox";
  EXPECT_EQ(f.sink.Count("tool.denied"), 1);
  const auto& msgs = f.model.requests[1].Find("messages")->items();
  EXPECT_EQ(msgs.back().Find("tool_call_id")->as_string(), "call_a");
  EXPECT_EQ(msgs.back().Find("content")->as_string().rfind("DENIED by the harness: permission:exec: rule:", 0), 0u)
      << msgs.back().Find("content")->as_string();
  EXPECT_EQ(out->denials, 1);
  EXPECT_EQ(out->tool_calls, 2);
}

TEST(AgentLoop, TokenBudgetByReservationEndsExactlyAtTheLimit) {
  Fixture f;
  f.manifest.budget.max_model_tokens = 30;
  f.model.replies.push_back(Call("call_a", "read_file", R"({"path": "README.md"})", 25));
  f.model.replies.push_back(Answer("word word word word word", 5, "length"));
  auto out = f.Run();
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->status, "budget_exhausted");
  EXPECT_EQ(out->model_tokens, 30);
  ASSERT_EQ(f.model.requests.size(), 2u);
  EXPECT_EQ(*f.model.requests[0].Find("max_tokens")->as_int64(), 30);
  EXPECT_EQ(*f.model.requests[1].Find("max_tokens")->as_int64(), 5);
  EXPECT_EQ(f.sink.Count("budget.warning"), 2);  // 50% and 80%, once each
}

TEST(AgentLoop, RouterOvershootIsAnErrorNeverSilent) {
  Fixture f;
  f.manifest.budget.max_model_tokens = 30;
  f.model.replies.push_back(Answer("too long", 31, "length"));
  auto out = f.Run();
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->status, "error");
}

TEST(AgentLoop, ToolCallsAreCountedBeforeTheyRun) {
  Fixture f;
  f.manifest.budget.max_tool_calls = 1;
  ModelReply two = Call("call_a", "read_file", R"({"path": "README.md"})", 10);
  two.tool_calls.push_back({"call_b", "read_file", R"({"path": "src/a.c"})"});
  f.model.replies.push_back(two);
  auto out = f.Run();
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->status, "budget_exhausted");
  EXPECT_EQ(f.tools.calls.size(), 1u);
  EXPECT_EQ(out->tool_calls, 1);
  EXPECT_EQ(f.sink.Count("tool.denied"), 1);
}

TEST(AgentLoop, ConsecutiveDenialsEndTheTask) {
  Fixture f;
  for (int i = 0; i < 5; ++i) {
    f.model.replies.push_back(Call("call_" + std::to_string(i), "read_file", R"({"path": "/etc/passwd"})", 5));
  }
  auto out = f.Run();
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->status, "denial_limit");
  EXPECT_EQ(out->denials, 3);
  EXPECT_TRUE(f.tools.calls.empty());
}

TEST(AgentLoop, MaxTurnsAndRouterErrors) {
  Fixture f;
  f.manifest.budget.max_turns = 2;
  f.model.replies.push_back(Call("call_a", "read_file", R"({"path": "README.md"})", 5));
  f.model.replies.push_back(Call("call_b", "read_file", R"({"path": "README.md"})", 5));
  auto out = f.Run();
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->status, "max_turns");

  Fixture g;
  g.model.replies.push_back(absl::PermissionDeniedError("HTTP 403 policy_denied"));
  out = g.Run();
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->status, "error");
  EXPECT_EQ(out->model_tokens, 64) << "unknown usage keeps the reservation charged";
  EXPECT_EQ(g.sink.Count("turn.failed"), 1);
}

TEST(AgentLoop, AcceptanceFailureAndLedgerFailure) {
  Fixture f;
  f.model.replies.push_back(Answer("see src/secret.c", 5));
  auto out = f.Run();
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->status, "acceptance_failed");
  ASSERT_EQ(out->acceptance.size(), 1u);
  EXPECT_FALSE(out->acceptance[0].passed);

  Fixture g;
  g.sink.fail_at = 3;  // tool.proposed cannot be recorded: nothing runs
  g.model.replies.push_back(Call("call_a", "read_file", R"({"path": "README.md"})", 5));
  out = g.Run();
  EXPECT_FALSE(out.ok());
  EXPECT_TRUE(g.tools.calls.empty());
}

TEST(AgentLoop, ChildTaskIsNarrowerAndChargedToTheParent) {
  Fixture f;
  f.manifest.tools.push_back("delegate_task");
  f.manifest.budget.max_children = 1;
  f.model.replies.push_back(Call("call_d", "delegate_task",
                                 R"({"goal": "read util", "tools": ["read_file"], "fs_read": ["src/**"],)"
                                 R"( "max_model_tokens": 100, "max_tool_calls": 2, "max_turns": 3})", 30));
  f.model.replies.push_back(Call("call_c", "read_file", R"({"path": "src/util.c"})", 20));   // child
  f.model.replies.push_back(Answer("- src/util.c adds", 10));                                // child
  f.model.replies.push_back(Answer("The child says src/util.c adds.", 10));                  // parent
  auto out = f.Run();
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->status, "acceptance_failed") << "the parent did not read src/util.c itself";
  EXPECT_EQ(out->model_tokens, 70);
  EXPECT_EQ(out->tool_calls, 2);
  // The child's first request advertised only read_file and was capped by its budget.
  EXPECT_EQ(f.model.requests[1].Find("tools")->items().size(), 1u);
  EXPECT_EQ(*f.model.requests[1].Find("max_tokens")->as_int64(), 64);
  const auto& last = f.model.requests[3].Find("messages")->items().back();
  EXPECT_EQ(last.Find("tool_call_id")->as_string(), "call_d");
  EXPECT_EQ(last.Find("content")->as_string().rfind("CHILD REPORT task_", 0), 0u);
  int child_started = 0;
  for (const auto& [type, p] : f.sink.events) {
    if (type == "child:task.started") {
      ++child_started;
      EXPECT_EQ(p.Find("gantry.task.parent_id")->as_string(), "task_000000000000000000000001");
    }
  }
  EXPECT_EQ(child_started, 1);
  EXPECT_EQ(f.sink.Count("task.delegated"), 1);
}

TEST(AgentLoop, DelegationNeverWidens) {
  for (const char* args : {
           R"({"goal": "g", "tools": ["read_file"], "fs_read": ["secret/**"], "max_model_tokens": 10, "max_tool_calls": 1, "max_turns": 1})",
           R"({"goal": "g", "tools": ["grep"], "max_model_tokens": 10, "max_tool_calls": 1, "max_turns": 1})",
           R"({"goal": "g", "tools": ["delegate_task"], "max_model_tokens": 10, "max_tool_calls": 1, "max_turns": 1})",
           R"({"goal": "g", "tools": ["read_file"], "max_model_tokens": 5000, "max_tool_calls": 1, "max_turns": 1})",
           R"({"goal": "g", "tools": ["read_file"], "max_model_tokens": 10, "max_tool_calls": 50, "max_turns": 1})",
           R"({"goal": "g", "tools": ["read_file"], "fs_read": ["src/../secret"], "max_model_tokens": 10, "max_tool_calls": 1, "max_turns": 1})"}) {
    Fixture f;
    f.manifest.tools.push_back("delegate_task");
    f.manifest.budget.max_children = 1;
    f.model.replies.push_back(Call("call_d", "delegate_task", args, 10));
    f.model.replies.push_back(Answer("ok", 1));
    auto out = f.Run();
    ASSERT_TRUE(out.ok());
    EXPECT_EQ(f.sink.Count("tool.denied"), 1) << args;
    EXPECT_EQ(f.sink.Count("task.delegated"), 0) << args;
    EXPECT_EQ(f.model.requests.size(), 2u) << args;
  }
}

}  // namespace
}  // namespace gantry::harness
