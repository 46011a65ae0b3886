// Explain equals enforce (issue 16): `gantry policy explain` and the router decide the
// same request alike. Over generated policies and requests (policy/policy_gen.h, the
// "served" kind), each request is asked of the real `gantry policy explain` binary as
// flags and sent over HTTP to a real gantry-router process, whose workers are the TEST
// DOUBLE router/fake_worker_for_test.h, scripted to emit the request's tool calls. Each
// policy is put in place by an atomic rename, which the router hot-reloads; the router's
// /metrics says when it is in force.
//
// What the router must have done, for each explain outcome (where the router says more
// than the policy, the mapping is explicit here):
//   deny, unknown_principal -> 401 unauthenticated. The router authenticates the key
//                              before it asks the policy, so no rule header.
//   deny, invalid_request   -> 400 invalid_request with x-gantry-policy-rule = the rule.
//   deny, any other reason  -> 403 policy_denied, x-gantry-policy-rule = the rule, and
//                              the message names "rule R (reason)".
//   allow or clamp          -> x-gantry-policy-rule = explain's rule, and then
//     the model is m2 (declared in the policy, served by no router entry)
//                           -> 404 model_not_found (the model's existence is checked
//                              after the policy, so a principal learns nothing of models
//                              it may not use);
//     explain's budgets hold a 0 (served policies have only 0 or unlimited budgets)
//                           -> 429;
//     otherwise admitted: the tools explain strips are stripped, each clamped value is
//     the value the worker is sent, and the model's calls are decided one by one as
//     `explain --user U --tool NAME --args JSON` decides them: at the first denied call
//     the request ends with tool_call_denied naming the same "rule R (reason)" (a 403,
//     or an error event once the stream has started) and no call reaches the client;
//     with none denied, every call reaches it, in order.
// Requests the HTTP parser refuses before any policy (a tool offered twice, temperature
// above 2, max_tokens 0, ...) are not generated: policy_gen.h, ServedRequest. The model
// calls only tools the request offers and explain does not strip: a real worker refuses
// any other call (invalid_tool_call), and the router denies one a rogue worker sends
// (tool_not_offered, router/tool_policy_test.cc), neither being a policy rule.
//
// The seed: EXPLAIN_ENFORCE_SEED in the environment, else a fixed one; every failure
// prints it with the policy and the request.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/json.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "policy/policy_gen.h"
#include "policy/policy_types.h"
#include "router/fake_worker_for_test.h"
#include "router/http/test_http_client.h"
#include "tokenizer-svc/tokenizer/tiny_tokenizers.h"

namespace gantry {
namespace {

using json::Value;
using policy::Param;
using testing::FakeStep;
using testing::FakeWorkerForTest;

constexpr int kPolicies = 24;
constexpr int kRequestsPerPolicy = 20;
constexpr uint64_t kDefaultSeed = 16;
// The served models and the output caps their bundles report: an omitted max_tokens is
// decided as 256 on m0 and as 20000 (beyond every generated bound) on m1.
const std::map<std::string, uint32_t> kServed = {{"m0", 256}, {"m1", 20000}};

// --- Processes -------------------------------------------------------------------

// Starts argv[0] with stdout and stderr on `out_fd`; the child dies with this process.
pid_t Spawn(const std::vector<std::string>& argv, int out_fd) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(out_fd, 1);
    dup2(out_fd, 2);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

// Runs argv to its end; what it printed (stdout and stderr).
std::string RunToEnd(const std::vector<std::string>& argv) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return "pipe failed";
  const pid_t pid = Spawn(argv, fds[1]);
  close(fds[1]);
  if (pid < 0) {
    close(fds[0]);
    return "fork failed";
  }
  std::string out;
  char buffer[4096];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    absl::StrAppend(&out, "[exit status ", WIFEXITED(status) ? WEXITSTATUS(status) : -1, "]\n");
  }
  return out;
}

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// --- What explain said -------------------------------------------------------------

struct Explained {
  std::string verdict, rule, reason, stripped, sha256;
  std::vector<std::pair<std::string, std::string>> clamps;  // field -> applied
  bool zero_budget = false;
  std::string text;  // the whole output
};

Explained ParseExplain(std::string text) {
  Explained e;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    absl::string_view value = line.substr(line.find(": ") == absl::string_view::npos
                                              ? line.size()
                                              : line.find(": ") + 2);
    if (absl::StartsWith(line, "verdict: ")) e.verdict = std::string(value);
    if (absl::StartsWith(line, "rule: ")) e.rule = std::string(value);
    if (absl::StartsWith(line, "reason: ")) e.reason = std::string(value);
    if (absl::StartsWith(line, "stripped: ")) e.stripped = std::string(value);
    if (absl::StartsWith(line, "policy_sha256: ")) e.sha256 = std::string(value);
    if (absl::StartsWith(line, "budgets: ")) e.zero_budget = absl::StrContains(line, "=0 ");
    if (absl::StartsWith(line, "clamp: ")) {
      const size_t arrow = value.find(" -> ");
      e.clamps.emplace_back(std::string(value.substr(0, value.find(' '))),
                            std::string(value.substr(arrow + 4)));
    }
  }
  e.text = std::move(text);
  return e;
}

// A parameter's value as both the HTTP body and explain's --param write it.
std::string ParamText(Param p, double v) {
  if (p == Param::kTemperature || p == Param::kTopP) return json::PythonFloatRepr(v);
  return policy::FormatParamValue(p, v);
}

uint32_t DefaultMaxTokens(const std::string& model) {
  auto it = kServed.find(model);
  return it == kServed.end() ? policy::kDefaultMaxTokens : it->second;
}

// `gantry policy explain` of the request as the router admits it.
std::vector<std::string> ExplainArgs(const std::string& policy_path, const policy::PolicyRequest& r) {
  std::vector<std::string> argv = {"cli/gantry", "policy", "explain", policy_path, "--key",
                                   r.api_key, "--model", r.model, "--default-max-tokens",
                                   absl::StrCat(DefaultMaxTokens(r.model))};
  for (int i = 0; i < policy::kParamCount; ++i) {
    const Param p = static_cast<Param>(i);
    if (!r.params.Has(p)) continue;
    argv.push_back("--param");
    argv.push_back(absl::StrCat(policy::ParamName(p), "=", ParamText(p, r.params.Get(p))));
  }
  for (const std::string& tool : r.offered_tools) {
    argv.push_back("--offer-tool");
    argv.push_back(tool);
  }
  if (!r.tool_choice_name.empty()) {
    argv.push_back("--tool-choice-name");
    argv.push_back(r.tool_choice_name);
  }
  for (const std::string& key : r.template_kwargs) {
    argv.push_back("--template-kwarg");
    argv.push_back(absl::StrCat(key, "=true"));  // KEY=JSON: what the body sends
  }
  return argv;
}

// --- What the router did -------------------------------------------------------------

std::string ChatBody(const policy::PolicyRequest& r, bool stream) {
  Value root = Value::EmptyObject();
  root.Set("model", Value::String(r.model));
  Value message = Value::EmptyObject();
  message.Set("role", Value::String("user"));
  message.Set("content", Value::String("hi"));
  Value messages = Value::EmptyArray();
  messages.Append(std::move(message));
  root.Set("messages", std::move(messages));
  Value kwargs = Value::EmptyObject();
  for (int i = 0; i < policy::kParamCount; ++i) {
    const Param p = static_cast<Param>(i);
    if (!r.params.Has(p)) continue;
    const double v = r.params.Get(p);
    const std::string name = policy::ParamName(p);
    switch (p) {
      case Param::kTemperature:
      case Param::kTopP:
        root.Set(name, Value::Double(v));
        break;
      case Param::kStopStrings: {
        Value stop = Value::EmptyArray();
        for (int s = 0; s < static_cast<int>(v); ++s) stop.Append(Value::String(absl::StrCat("<stop", s, ">")));
        root.Set("stop", std::move(stop));
        break;
      }
      case Param::kToolChoice:
        if (static_cast<policy::ToolChoice>(static_cast<int>(v)) == policy::ToolChoice::kNamed) {
          Value function = Value::EmptyObject();
          function.Set("name", Value::String(r.tool_choice_name));
          Value choice = Value::EmptyObject();
          choice.Set("type", Value::String("function"));
          choice.Set("function", std::move(function));
          root.Set(name, std::move(choice));
        } else {
          root.Set(name, Value::String(policy::FormatParamValue(p, v)));
        }
        break;
      case Param::kParallelToolCalls:
        root.Set(name, Value::Bool(v != 0));
        break;
      case Param::kEnableThinking:
        kwargs.Set(name, Value::Bool(v != 0));
        break;
      case Param::kReasoningEffort:
        root.Set(name, Value::String(policy::FormatParamValue(p, v)));
        break;
      default:  // max_tokens, top_k, seed
        root.Set(name, Value::Int(static_cast<int64_t>(v)));
    }
  }
  for (const std::string& key : r.template_kwargs) kwargs.Set(key, Value::Bool(true));
  if (!kwargs.members().empty()) root.Set("chat_template_kwargs", std::move(kwargs));
  if (!r.offered_tools.empty()) {
    Value tools = Value::EmptyArray();
    for (const std::string& name : r.offered_tools) {
      Value parameters = Value::EmptyObject();
      parameters.Set("type", Value::String("object"));
      Value function = Value::EmptyObject();
      function.Set("name", Value::String(name));
      function.Set("parameters", std::move(parameters));
      Value tool = Value::EmptyObject();
      tool.Set("type", Value::String("function"));
      tool.Set("function", std::move(function));
      tools.Append(std::move(tool));
    }
    root.Set("tools", std::move(tools));
  }
  if (stream) root.Set("stream", Value::Bool(true));
  return json::DumpCompact(root);
}

struct Answer {
  int status = 0;
  std::string rule, sha256, stripped;
  std::string code, message;          // of the error, when there is one
  std::vector<std::string> calls;     // the tool calls delivered, by name
  std::string body;
};

void ReadCalls(const Value* calls, Answer* a) {
  if (calls == nullptr || !calls->is_array()) return;
  for (const Value& call : calls->items()) {
    const Value* function = call.Find("function");
    const Value* name = function ? function->Find("name") : nullptr;
    if (name && name->is_string()) a->calls.push_back(name->as_string());
  }
}

// An error object, or the tool calls of choices[0][part] ("message" in a whole response,
// "delta" in a stream's chunk).
void ReadJson(absl::string_view text, const char* part, Answer* a) {
  auto root = json::Parse(text);
  if (!root.ok()) return;  // a stream's [DONE]
  if (const Value* error = root->Find("error"); error && error->is_object()) {
    if (const Value* code = error->Find("code"); code && code->is_string()) a->code = code->as_string();
    if (const Value* m = error->Find("message"); m && m->is_string()) a->message = m->as_string();
  }
  const Value* choices = root->Find("choices");
  if (choices == nullptr || !choices->is_array() || choices->items().empty()) return;
  if (const Value* p = choices->items()[0].Find(part)) ReadCalls(p->Find("tool_calls"), a);
}

Answer ReadAnswer(const http::TestResponse& r) {
  Answer a;
  a.status = r.status;
  a.rule = r.Header("x-gantry-policy-rule");
  a.sha256 = r.Header("x-gantry-policy-sha256");
  a.stripped = r.Header("x-gantry-tools-stripped");
  a.body = r.body;
  if (!absl::StartsWith(r.Header("content-type"), "text/event-stream")) {
    ReadJson(r.body, "message", &a);
  } else {
    for (const std::string& data : http::SseDataLines(r.body)) ReadJson(data, "delta", &a);
  }
  return a;
}

std::string Describe(const Answer& a) {
  return absl::StrCat("HTTP ", a.status, ", x-gantry-policy-rule: ", a.rule,
                      ", x-gantry-tools-stripped: ", a.stripped, ", code: ", a.code,
                      ", message: ", a.message, ", calls: [", absl::StrJoin(a.calls, ","), "]\n",
                      a.body.substr(0, 2000));
}

// --- The router ------------------------------------------------------------------

class ExplainEnforceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = absl::StrCat(tmp ? tmp : "/tmp", "/explain_enforce");
    std::filesystem::create_directories(dir_ + "/tok");
    policy_path_ = dir_ + "/policy.yaml";
    WriteFile(dir_ + "/tok/tokenizer.json", tokenizer::TinyByteLevelTokenizerJson());
    Value config = Value::EmptyObject();
    config.Set("chat_template",
               Value::String("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
                             "<|im_end|>\n{% endfor %}<|im_start|>assistant\n"));
    WriteFile(dir_ + "/tok/tokenizer_config.json", json::DumpCompact(config));
    std::string models;
    for (const auto& [name, cap] : kServed) {
      absl::StrAppend(&models, models.empty() ? "" : ",", R"({"name":")", name,
                      R"(","tokenizer_dir":"tok","context_length":65536,)",
                      R"("tool_protocol":"hermes_json","default_max_tokens":)", cap, "}");
    }
    WriteFile(dir_ + "/models.json", absl::StrCat(R"({"models":[)", models, "]}"));
    const char* seed = std::getenv("EXPLAIN_ENFORCE_SEED");
    if (seed == nullptr || !absl::SimpleAtoi(seed, &seed_)) seed_ = kDefaultSeed;
  }

  void TearDown() override {
    workers_.clear();
    if (router_pid_ > 0) {
      kill(router_pid_, SIGKILL);
      waitpid(router_pid_, nullptr, 0);
    }
  }

  // Starts gantry-router on `first_policy` and a worker for each served model.
  void StartRouter(const std::string& first_policy) {
    WriteFile(policy_path_, first_policy);
    http_port_ = FreePort();
    const std::string workers = absl::StrCat("tcp://127.0.0.1:", FreePort());
    log_path_ = dir_ + "/router.log";
    const int log = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    router_pid_ = Spawn({"router/gantry-router", "--policy", policy_path_, "--models",
                         dir_ + "/models.json", "--listen", absl::StrCat("127.0.0.1:", http_port_),
                         "--workers", workers, "--insecure-workers"},  // the test's own workers
                        log);
    close(log);
    for (const auto& [model, cap] : kServed) {
      testing::FakeWorkerOptions options;
      options.endpoint = workers;
      options.worker_id = "fakehost/1/" + model;
      options.model = model;
      options.context_length = 65536;
      options.default_max_tokens = cap;
      // The default 1 s: a request missing from two heartbeats is lost, and 200 ms lost
      // one when the machine was busy with other tests (the REQUEST not yet read).
      options.heartbeat_interval_ms = 1000;
      workers_[model] = std::make_unique<FakeWorkerForTest>(options);
    }
    ASSERT_TRUE(WaitForMetric(absl::StrCat("gantry_router_live_workers ", kServed.size(), "\n")))
        << "the router did not come up with its workers:\n" << ReadFile(log_path_);
  }

  // Puts `text` in place as the policy file (atomically) and waits until it is in force.
  void InstallPolicy(const std::string& text) {
    const std::string staged = dir_ + "/policy.yaml.new";
    WriteFile(staged, text);
    std::filesystem::rename(staged, policy_path_);
    ASSERT_TRUE(WaitForMetric(
        absl::StrCat("gantry_policy_info{sha256=\"", Sha256Hex(text), "\"} 1")))
        << "the router did not reload the policy:\n" << text << "\n" << ReadFile(log_path_);
  }

  // Polls GET /metrics until it contains `line`, for 20 seconds at most.
  bool WaitForMetric(const std::string& line) {
    for (int i = 0; i < 1000; ++i) {
      auto client = http::TestHttpClient::Connect(http_port_);
      if (client.ok() && client->SendRequest("GET", "/metrics", "").ok()) {
        auto response = client->ReadResponse(2000);
        if (response.ok() && absl::StrContains(response->body, line)) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  Answer Send(const std::string& body, const std::string& key) {
    auto response = http::TestHttpClient::PostJson(http_port_, "/v1/chat/completions", body, key);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? ReadAnswer(*response) : Answer{};
  }

  std::string dir_, policy_path_, log_path_;
  uint64_t seed_ = kDefaultSeed;
  int http_port_ = 0;
  pid_t router_pid_ = -1;
  std::map<std::string, std::unique_ptr<FakeWorkerForTest>> workers_;
};

// The value the worker was sent for a clamped field, as explain prints values.
std::string SentValue(const std::string& field, const v1::InferenceRequest& sent) {
  if (field == "max_tokens") return absl::StrCat(sent.max_tokens());
  if (field == "temperature") return absl::StrCat(sent.sampling().temperature());
  if (field == "top_p") return absl::StrCat(sent.sampling().top_p());
  if (field == "top_k") return absl::StrCat(sent.sampling().top_k());
  if (field == "seed") return absl::StrCat(sent.sampling().seed());
  if (field == "stop_strings") return absl::StrCat(sent.stop_size());
  if (field == "parallel_tool_calls") return sent.parallel_tool_calls() ? "true" : "false";
  if (field == "reasoning_effort") return sent.reasoning_effort();
  if (field == "enable_thinking") {
    auto it = sent.template_kwargs_json().find("enable_thinking");
    return it == sent.template_kwargs_json().end() ? "unset" : it->second;
  }
  return "?";
}

// Explain's applied value as the worker gets it (temperature and top_p travel as float).
std::string AppliedAsSent(const std::string& field, const std::string& applied) {
  double v = 0;
  if ((field == "temperature" || field == "top_p") && absl::SimpleAtod(applied, &v)) {
    return absl::StrCat(static_cast<float>(v));
  }
  return applied;
}

// What happened to one request, for the summary.
struct Tally {
  int checked = 0, denied = 0, unserved = 0, over_budget = 0, admitted = 0;
  int calls_denied = 0, calls_delivered = 0;
  std::map<std::string, int> deny_reasons;
};

// How the router's answer `a` differs from what explain's decision `e` says it must be,
// or "" when it does not. `sent`: what the worker got (nullptr: nothing). `call_explains`
// gets what explain said of the model's calls.
std::string Disagreement(const std::string& policy_path, const policy::ServedRequest& served,
                         const Explained& e, const Answer& a, const v1::InferenceRequest* sent,
                         Tally* tally, std::string* call_explains) {
  const policy::PolicyRequest& r = served.request;
  if (e.verdict.empty() || e.sha256.empty()) return "explain printed no decision";
  if (e.verdict == "deny") {
    ++tally->denied;
    ++tally->deny_reasons[e.reason + (absl::StrContains(e.rule, ".deny.") ? " (explicit deny)" : "")];
    if (e.reason == "unknown_principal") {
      return a.status == 401 && a.code == "unauthenticated" ? "" : "expected 401 unauthenticated";
    }
    const bool malformed = e.reason == "invalid_request";
    const bool same =
        a.status == (malformed ? 400 : 403) &&
        a.code == (malformed ? "invalid_request" : "policy_denied") && a.rule == e.rule &&
        a.sha256 == e.sha256 &&
        (malformed ||
         absl::StrContains(a.message, absl::StrCat("denied by rule ", e.rule, " (", e.reason, ")")));
    return same ? "" : "explain denies; the router must refuse with the same rule";
  }
  // Allowed or clamped by the policy.
  if (a.rule != e.rule || a.sha256 != e.sha256) {
    return "explain admits; the router's x-gantry-policy-rule must be explain's rule";
  }
  if (kServed.count(r.model) == 0) {
    ++tally->unserved;
    return a.status == 404 && a.code == "model_not_found" ? "" : "expected 404 model_not_found";
  }
  if (e.zero_budget) {
    ++tally->over_budget;
    return a.status == 429 ? "" : "explain's budgets hold a 0: expected 429";
  }
  ++tally->admitted;
  if (a.stripped != e.stripped) return "the router stripped other tools than explain";
  if (sent == nullptr) return "explain admits; the router did not send the request to the worker";
  for (const auto& [field, applied] : e.clamps) {
    if (SentValue(field, *sent) != AppliedAsSent(field, applied)) {
      return absl::StrCat("explain clamps ", field, " to ", applied, "; the worker was sent ",
                          SentValue(field, *sent));
    }
  }
  // The model's calls, each as explain decides it for the admitted principal.
  const std::string user = r.api_key.substr(std::string("key-").size());
  std::vector<std::string> names;
  for (const policy::ModelToolCall& call : served.model_calls) {
    const std::vector<std::string> args = {"cli/gantry", "policy", "explain", policy_path, "--user",
                                           user, "--tool", call.name, "--args", call.arguments_json};
    const Explained c = ParseExplain(RunToEnd(args));
    absl::StrAppend(call_explains, "explain: ", absl::StrJoin(args, " "), "\n", c.text);
    if (c.verdict.empty()) return "explain printed no decision for a call";
    if (c.verdict == "deny") {
      ++tally->calls_denied;
      const std::string named = absl::StrCat("rule ", c.rule, " (", c.reason, ")");
      return a.code == "tool_call_denied" && absl::StrContains(a.message, named) && a.calls.empty()
                 ? ""
                 : absl::StrCat("explain denies a call of the model (", named,
                                "); the router must end the request with tool_call_denied "
                                "naming it, and deliver no call");
    }
    names.push_back(call.name);
  }
  tally->calls_delivered += static_cast<int>(names.size());
  return a.status == 200 && a.code.empty() && a.calls == names
             ? ""
             : "explain allows every call of the model; the router must deliver them all";
}

TEST_F(ExplainEnforceTest, ExplainsVerdictAndRuleAreWhatTheRouterDoes) {
  std::mt19937_64 rng(seed_);
  policy::PolicyGenOptions options;
  options.served = true;
  options.deny_percent = 8;
  Tally tally;
  int mismatches = 0;
  for (int i = 0; i < kPolicies && mismatches < 5; ++i) {
    const policy::GeneratedPolicy generated = policy::GeneratePolicy(2, 1, 12, rng, options);
    const std::string text = generated.Render();
    if (i == 0) {
      StartRouter(text);
    } else {
      InstallPolicy(text);
    }
    if (HasFatalFailure()) return;
    for (int j = 0; j < kRequestsPerPolicy && mismatches < 5; ++j) {
      policy::ServedRequest served = policy::RandomServedRequest(generated, rng);
      const policy::PolicyRequest& r = served.request;
      const bool stream = rng() % 3 == 0;
      const bool text_first = rng() % 2 == 0;
      const std::vector<std::string> explain_args = ExplainArgs(policy_path_, r);
      const Explained e = ParseExplain(RunToEnd(explain_args));
      // The model calls only what it was offered (see the header).
      const std::vector<std::string> stripped = absl::StrSplit(e.stripped, ',', absl::SkipEmpty());
      auto& calls = served.model_calls;
      calls.erase(std::remove_if(calls.begin(), calls.end(),
                                 [&](const policy::ModelToolCall& c) {
                                   return std::find(r.offered_tools.begin(), r.offered_tools.end(),
                                                    c.name) == r.offered_tools.end() ||
                                          std::find(stripped.begin(), stripped.end(), c.name) !=
                                              stripped.end();
                                 }),
                  calls.end());
      // The model's answer: maybe some text, then the calls.
      std::vector<FakeStep> script;
      if (text_first) script.push_back(FakeStep::Text("Looking."));
      for (const policy::ModelToolCall& call : served.model_calls) {
        script.push_back(FakeStep::ToolCall(call.name, call.arguments_json));
      }
      script.push_back(FakeStep::Finish(served.model_calls.empty() ? v1::FINISH_STOP
                                                                   : v1::FINISH_TOOL_CALLS));
      for (auto& [model, worker] : workers_) worker->SetScript(script);
      auto worker = workers_.find(r.model);
      const size_t sent_before = worker == workers_.end() ? 0 : worker->second->requests().size();
      const std::string body = ChatBody(r, stream);
      const Answer a = Send(body, r.api_key);
      ++tally.checked;
      std::vector<v1::InferenceRequest> sent;
      if (worker != workers_.end()) sent = worker->second->requests();

      std::string call_explains;
      const std::string why =
          Disagreement(policy_path_, served, e, a, sent.size() > sent_before ? &sent.back() : nullptr,
                       &tally, &call_explains);
      if (why.empty()) continue;
      ++mismatches;
      ADD_FAILURE() << why << "\nseed " << seed_ << " (EXPLAIN_ENFORCE_SEED), policy " << i
                    << ", request " << j << "\nexplain: " << absl::StrJoin(explain_args, " ")
                    << "\n" << e.text << call_explains << "router: POST " << body << " (key "
                    << r.api_key << ")\n" << Describe(a) << "\n--- policy ---\n" << text;
    }
  }
  std::printf("seed %llu: %d requests over %d policies: %d denied; allowed: %d of an unserved "
              "model, %d over a budget of 0, %d admitted (%d ended by a denied tool call, %d "
              "tool calls delivered)\n",
              static_cast<unsigned long long>(seed_), tally.checked, kPolicies, tally.denied,
              tally.unserved, tally.over_budget, tally.admitted, tally.calls_denied,
              tally.calls_delivered);
  for (const auto& [reason, n] : tally.deny_reasons) std::printf("  denied %s: %d\n", reason.c_str(), n);
  // The generator does reach every kind of outcome.
  EXPECT_GT(tally.denied, tally.checked / 4);
  EXPECT_GT(tally.unserved + tally.over_budget, 10);
  EXPECT_GT(tally.admitted, tally.checked / 20);
  EXPECT_GT(tally.calls_denied, 2);
  EXPECT_GT(tally.calls_delivered, 0);
}

}  // namespace
}  // namespace gantry
