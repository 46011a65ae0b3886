#include "policy/policy_decide.h"

#include <cmath>
#include <string>

#include "gantry/v1/policy.pb.h"
#include "gtest/gtest.h"
#include "policy/policy_test_util.h"

namespace gantry::policy {
namespace {

std::shared_ptr<const Snapshot> MustLoad(const std::string& grants) {
  auto snap = LoadTestPolicy(grants);
  EXPECT_TRUE(snap.ok()) << snap.status();
  return snap.ok() ? *snap : nullptr;
}

PolicyRequest Req(const std::string& principal, const std::string& model = "m1") {
  PolicyRequest r;
  r.principal = principal;
  r.model = model;
  return r;
}

PolicyRequest WithParam(PolicyRequest r, Param p, const std::string& text) {
  auto v = ParseParamValue(p, text);
  EXPECT_TRUE(v.ok()) << v.status();
  r.params.Set(p, *v);
  return r;
}

// --- principals and models ---

TEST(DecideTest, UnknownKeyAndNameAreDenied) {
  auto snap = MustLoad("  - {user: alice, models: {m1: {}}}\n");
  PolicyRequest r;
  r.api_key = "not-a-key";
  r.model = "m1";
  Decision d = Decide(*snap, r);
  EXPECT_EQ(d.verdict, Verdict::kDeny);
  EXPECT_EQ(d.reason, "unknown_principal");
  EXPECT_EQ(d.rule_id, "principals");
  EXPECT_EQ(d.policy_sha256, snap->sha256);
  d = Decide(*snap, Req("mallory"));
  EXPECT_EQ(d.reason, "unknown_principal");
}

TEST(DecideTest, KeyIsHashedAndLookedUp) {
  auto snap = MustLoad("  - {user: alice, models: {m1: {}}}\n");
  PolicyRequest r;
  r.api_key = "key-alice";
  r.model = "m1";
  Decision d = Decide(*snap, r);
  EXPECT_EQ(d.verdict, Verdict::kAllow) << d.message;
  EXPECT_EQ(d.principal, "alice");
  EXPECT_EQ(d.rule_id, "grants[0].models.m1");
  EXPECT_EQ(d.reason, "");
}

TEST(DecideTest, DenyByDefaultAndUnknownModel) {
  auto snap = MustLoad("  - {user: alice, models: {m1: {}}}\n");
  Decision d = Decide(*snap, Req("alice", "m2"));
  EXPECT_EQ(d.verdict, Verdict::kDeny);
  EXPECT_EQ(d.reason, "model_not_granted");
  EXPECT_EQ(d.rule_id, "default_deny");
  d = Decide(*snap, Req("alice", "m9"));
  EXPECT_EQ(d.reason, "unknown_model");
  d = Decide(*snap, Req("carol"));
  EXPECT_EQ(d.reason, "model_not_granted");
}

TEST(DecideTest, EmptyRequestIsInvalid) {
  auto snap = MustLoad("  - {user: alice, models: {m1: {}}}\n");
  Decision d = Decide(*snap, Req("alice", ""));
  EXPECT_EQ(d.reason, "invalid_request");
}

// --- parameters ---

TEST(DecideTest, NumericBoundRejects) {
  auto snap = MustLoad(
      "  - user: alice\n"
      "    models:\n"
      "      m1:\n"
      "        temperature: {min: 0.1, max: 1.0, action: reject}\n");
  Decision d = Decide(*snap, WithParam(Req("alice"), Param::kTemperature, "1.5"));
  EXPECT_EQ(d.verdict, Verdict::kDeny);
  EXPECT_EQ(d.reason, "parameter_out_of_range");
  EXPECT_EQ(d.rule_id, "grants[0].models.m1.temperature");
  d = Decide(*snap, WithParam(Req("alice"), Param::kTemperature, "0.05"));
  EXPECT_EQ(d.verdict, Verdict::kDeny);
  d = Decide(*snap, WithParam(Req("alice"), Param::kTemperature, "0.7"));
  EXPECT_EQ(d.verdict, Verdict::kAllow);
  // Absent, and no default known: the bound's max is used.
  d = Decide(*snap, Req("alice"));
  EXPECT_EQ(d.verdict, Verdict::kClamp);
  ASSERT_EQ(d.clamps.size(), 1u);
  EXPECT_EQ(d.clamps[0].requested, "unset");
  EXPECT_EQ(d.clamps[0].applied, "1");
  // Absent as served: checked as the worker's default (0, greedy), which the bound
  // refuses: the client must send a temperature.
  PolicyRequest served = Req("alice");
  CompleteAsServed(&served, 1024);
  d = Decide(*snap, served);
  EXPECT_EQ(d.verdict, Verdict::kDeny);
  EXPECT_EQ(d.rule_id, "grants[0].models.m1.temperature");
  EXPECT_NE(d.message.find("unset (default 0)"), std::string::npos) << d.message;
}

TEST(DecideTest, NumericBoundClampsBothWays) {
  auto snap = MustLoad(
      "  - user: alice\n"
      "    models:\n"
      "      m1:\n"
      "        top_p: {min: 0.1, max: 0.9, action: clamp}\n"
      "        top_k: {min: 5, max: 40, action: clamp}\n"
      "        seed: {max: 1000, action: clamp}\n");
  PolicyRequest r = WithParam(Req("alice"), Param::kTopP, "0.95");
  r = WithParam(r, Param::kTopK, "2");
  r = WithParam(r, Param::kSeed, "5000");
  Decision d = Decide(*snap, r);
  EXPECT_EQ(d.verdict, Verdict::kClamp);
  EXPECT_EQ(d.rule_id, "grants[0].models.m1.top_p");
  ASSERT_EQ(d.clamps.size(), 3u);
  EXPECT_EQ(d.clamps[0].field, "top_p");
  EXPECT_EQ(d.clamps[0].requested, "0.95");
  EXPECT_EQ(d.clamps[0].applied, "0.9");
  EXPECT_EQ(d.clamps[1].applied, "5");
  EXPECT_EQ(d.clamps[2].applied, "1000");
  EXPECT_DOUBLE_EQ(d.effective.Get(Param::kTopK), 5);
}

// Before: a router, which holds temperature as the float its parser made (1.2 became
// 1.2000000477), denied a request of temperature 1.2 under "max: 1.2" that explain,
// holding the double 1.2, allowed (found by //tests/integration:explain_enforce_test).
TEST(DecideTest, TemperatureAndTopPAreDecidedAsTheFloatsTheWorkerGets) {
  auto snap = MustLoad(
      "  - user: alice\n"
      "    models:\n"
      "      m1:\n"
      "        temperature: {min: 0.3, max: 1.2, action: reject}\n"
      "        top_p: {max: 0.6, action: clamp}\n");
  for (double t : {1.2, static_cast<double>(1.2f), 0.3, static_cast<double>(0.3f)}) {
    PolicyRequest r = Req("alice");
    r.params.Set(Param::kTemperature, t);
    Decision d = Decide(*snap, r);
    EXPECT_EQ(d.verdict, Verdict::kClamp) << t << ": " << d.message;  // top_p unset
    EXPECT_EQ(d.rule_id, "grants[0].models.m1.top_p");
    EXPECT_EQ(d.effective.Get(Param::kTemperature), static_cast<double>(static_cast<float>(t)));
  }
  // 1.2000001 is that float too (it is nearer to it than to the next); 1.2000002 is not.
  EXPECT_NE(Decide(*snap, WithParam(Req("alice"), Param::kTemperature, "1.2000001")).verdict,
            Verdict::kDeny);
  EXPECT_EQ(Decide(*snap, WithParam(Req("alice"), Param::kTemperature, "1.2000002")).verdict,
            Verdict::kDeny);
  // A clamp applies the bound as a float, which is what the worker is sent.
  PolicyRequest r = WithParam(Req("alice"), Param::kTemperature, "1");
  r.params.Set(Param::kTopP, static_cast<double>(0.6f));
  EXPECT_EQ(Decide(*snap, r).verdict, Verdict::kAllow);
  r = WithParam(r, Param::kTopP, "0.9");
  Decision d = Decide(*snap, r);
  EXPECT_EQ(d.verdict, Verdict::kClamp);
  EXPECT_EQ(d.effective.Get(Param::kTopP), static_cast<double>(0.6f));
  EXPECT_EQ(d.clamps[0].applied, "0.6");
}

TEST(DecideTest, OmittedMaxTokensGetsTheBound) {
  auto snap = MustLoad("  - {user: alice, models: {m1: {max_tokens: {max: 512, action: reject}}}}\n");
  Decision d = Decide(*snap, Req("alice"));
  EXPECT_EQ(d.verdict, Verdict::kClamp);
  ASSERT_EQ(d.clamps.size(), 1u);
  EXPECT_EQ(d.clamps[0].requested, "unset");
  EXPECT_EQ(d.clamps[0].applied, "512");
  EXPECT_TRUE(d.effective.Has(Param::kMaxTokens));
  d = Decide(*snap, WithParam(Req("alice"), Param::kMaxTokens, "513"));
  EXPECT_EQ(d.verdict, Verdict::kDeny);
  d = Decide(*snap, WithParam(Req("alice"), Param::kMaxTokens, "512"));
  EXPECT_EQ(d.verdict, Verdict::kAllow);
}

TEST(DecideTest, StopStringsToolChoiceParallelReasoning) {
  auto snap = MustLoad(
      "  - user: alice\n"
      "    models:\n"
      "      m1:\n"
      "        stop_strings: {max: 2, action: reject}\n"
      "        tool_choice: {allowed: [auto, none]}\n"
      "        parallel_tool_calls: {allowed: false, action: clamp}\n"
      "        reasoning_effort: {max: medium, action: clamp}\n");
  EXPECT_EQ(Decide(*snap, WithParam(Req("alice"), Param::kStopStrings, "3")).rule_id,
            "grants[0].models.m1.stop_strings");
  Decision d = Decide(*snap, WithParam(Req("alice"), Param::kToolChoice, "required"));
  EXPECT_EQ(d.verdict, Verdict::kDeny);
  EXPECT_EQ(d.rule_id, "grants[0].models.m1.tool_choice");
  // Served, offering a tool: parallel_tool_calls omitted is true (the worker's default),
  // clamped to false.
  auto served = [](PolicyRequest r) {
    r.offered_tools = {"t"};
    CompleteAsServed(&r, 1024);
    return r;
  };
  d = Decide(*snap, served(WithParam(Req("alice"), Param::kToolChoice, "none")));
  EXPECT_EQ(d.verdict, Verdict::kClamp);
  ASSERT_EQ(d.clamps.size(), 1u);
  EXPECT_EQ(d.clamps[0].field, "parallel_tool_calls");
  EXPECT_EQ(d.clamps[0].requested, "unset");
  EXPECT_EQ(d.clamps[0].applied, "false");
  EXPECT_EQ(d.effective.Get(Param::kParallelToolCalls), 0);
  d = Decide(*snap, served(WithParam(Req("alice"), Param::kParallelToolCalls, "true")));
  EXPECT_EQ(d.verdict, Verdict::kClamp);
  EXPECT_EQ(d.clamps[0].applied, "false");
  d = Decide(*snap, served(WithParam(WithParam(Req("alice"), Param::kReasoningEffort, "high"),
                                     Param::kParallelToolCalls, "false")));
  EXPECT_EQ(d.verdict, Verdict::kClamp);
  ASSERT_EQ(d.clamps.size(), 1u);
  EXPECT_EQ(d.clamps[0].requested, "high");
  EXPECT_EQ(d.clamps[0].applied, "medium");
  // Omitted reasoning_effort is decided as medium, inside the bound, and is sent.
  d = Decide(*snap, served(WithParam(Req("alice"), Param::kParallelToolCalls, "false")));
  EXPECT_EQ(d.verdict, Verdict::kAllow);
  EXPECT_EQ(d.effective.Get(Param::kReasoningEffort), 2);
}

TEST(DecideTest, TopKOffIsUnbounded) {
  auto snap = MustLoad(
      "  - user: alice\n"
      "    models:\n"
      "      m1:\n"
      "        top_k: {max: 40, action: clamp}\n"
      "  - user: bob\n"
      "    models:\n"
      "      m1:\n"
      "        top_k: {max: 40, action: reject}\n");
  PolicyRequest r = Req("alice");
  CompleteAsServed(&r, 1024);  // top_k omitted: 0, "off"
  Decision d = Decide(*snap, r);
  EXPECT_EQ(d.verdict, Verdict::kClamp);
  EXPECT_EQ(d.effective.Get(Param::kTopK), 40);
  d = Decide(*snap, WithParam(r, Param::kTopK, "0"));
  EXPECT_EQ(d.effective.Get(Param::kTopK), 40);
  r.principal = "bob";
  EXPECT_EQ(Decide(*snap, r).reason, "parameter_out_of_range");
  EXPECT_EQ(Decide(*snap, WithParam(r, Param::kTopK, "20")).verdict, Verdict::kAllow);
}

TEST(DecideTest, EnableThinkingAndTemplateKwargsNeedAGrant) {
  auto snap = MustLoad(
      "  - user: alice\n"
      "    models:\n"
      "      m1:\n"
      "        enable_thinking: {allowed: false, action: clamp}\n"
      "  - user: bob\n"
      "    models:\n"
      "      m1: {}\n");
  PolicyRequest r = Req("alice");
  CompleteAsServed(&r, 1024);
  Decision d = Decide(*snap, r);  // omitted: true (templates think by default): clamped
  EXPECT_EQ(d.verdict, Verdict::kClamp);
  EXPECT_EQ(d.effective.Get(Param::kEnableThinking), 0);
  r.principal = "bob";
  EXPECT_EQ(Decide(*snap, r).verdict, Verdict::kAllow);  // not set, not bounded
  d = Decide(*snap, WithParam(r, Param::kEnableThinking, "false"));
  EXPECT_EQ(d.reason, "parameter_not_granted");
  EXPECT_EQ(d.rule_id, "default_deny");
  r.template_kwargs = {"custom_flag"};
  d = Decide(*snap, r);
  EXPECT_EQ(d.reason, "template_kwarg_not_granted");
}

TEST(DecideTest, OfferedToolsAreStrippedOrRefused) {
  const std::string grants =
      "  - user: alice\n"
      "    models: {m1: {}}\n"
      "    tools: {read_file: {}, list_dir: {}}\n"
      "  - user: alice\n"
      "    deny: {tools: [list_dir]}\n";
  auto strip = MustLoad(grants);
  PolicyRequest r = Req("alice");
  r.offered_tools = {"read_file", "list_dir", "Read_File", "read_f\xd1\x96le", "write_file"};
  CompleteAsServed(&r, 1024);
  Decision d = Decide(*strip, r);
  EXPECT_EQ(d.verdict, Verdict::kAllow);
  // Case and a Cyrillic i are other names: never granted.
  EXPECT_EQ(d.stripped_tools,
            (std::vector<std::string>{"list_dir", "Read_File", "read_f\xd1\x96le", "write_file"}));
  ASSERT_EQ(d.offered_tools.size(), 5u);
  EXPECT_TRUE(d.offered_tools[0].granted);
  EXPECT_EQ(d.offered_tools[0].rule_id, "grants[0].tools.read_file");
  EXPECT_EQ(d.offered_tools[1].rule_id, "grants[1].deny.tools[0]");
  EXPECT_EQ(d.offered_tools[4].rule_id, "default_deny");
  // A named tool_choice on a stripped tool, or required with none left: refused.
  PolicyRequest named = WithParam(r, Param::kToolChoice, "named");
  named.tool_choice_name = "write_file";
  EXPECT_EQ(Decide(*strip, named).reason, "tool_not_granted");
  PolicyRequest required = WithParam(Req("alice"), Param::kToolChoice, "required");
  required.offered_tools = {"write_file"};
  EXPECT_EQ(Decide(*strip, required).reason, "tool_not_granted");
  // Offered twice: a malformed request.
  PolicyRequest twice = Req("alice");
  twice.offered_tools = {"read_file", "read_file"};
  EXPECT_EQ(Decide(*strip, twice).reason, "invalid_request");
  // No tool grants at all: nothing may be offered.
  auto none = MustLoad("  - {user: alice, models: {m1: {}}}\n");
  PolicyRequest one = Req("alice");
  one.offered_tools = {"read_file"};
  EXPECT_EQ(Decide(*none, one).stripped_tools, std::vector<std::string>{"read_file"});
}

TEST(DecideTest, ModelToolCallsFromJson) {
  auto snap = MustLoad(
      "  - user: alice\n"
      "    tools:\n"
      "      read_file: {args: {path: {globs: [\"/workspace/**\"]}}}\n"
      "      now: {}\n");
  auto decide = [&](const std::string& name, const std::string& json) {
    PolicyRequest r = Req("alice");
    r.model.clear();
    r.tools.push_back(ToolCallFromJson(name, json));
    return Decide(*snap, r);
  };
  EXPECT_EQ(decide("read_file", R"({"path":"/workspace/a.c"})").verdict, Verdict::kAllow);
  Decision d = decide("read_file", R"({"path":"/etc/shadow"})");
  EXPECT_EQ(d.reason, "tool_arguments_not_allowed");
  EXPECT_EQ(d.rule_id, "grants[0].tools.read_file.args.path");
  EXPECT_EQ(decide("read_file", R"({"path":"/workspace/../etc/shadow"})").reason,
            "tool_arguments_not_allowed");
  EXPECT_EQ(decide("read_file", R"({"path":"/workspace//x"})").reason, "tool_arguments_not_allowed");
  // Given twice (readers disagree on which copy counts), not a string, missing, not an
  // object, not JSON: each denied, also under a grant of any arguments.
  EXPECT_EQ(decide("read_file", R"({"path":"/workspace/a","path":"/etc/shadow"})").rule_id, "request");
  EXPECT_EQ(decide("read_file", R"({"path":["/workspace/a"]})").reason, "tool_arguments_not_allowed");
  EXPECT_EQ(decide("read_file", R"({"path":null})").reason, "tool_arguments_not_allowed");
  EXPECT_EQ(decide("read_file", R"({})").reason, "tool_arguments_not_allowed");
  EXPECT_EQ(decide("now", R"(["x"])").reason, "tool_arguments_not_allowed");
  EXPECT_EQ(decide("now", R"({"a":1,"a":2})").reason, "tool_arguments_not_allowed");
  EXPECT_EQ(decide("now", R"({"a":)").reason, "tool_arguments_not_allowed");
  EXPECT_EQ(decide("now", R"({"a":{"b":1}})").verdict, Verdict::kAllow);
  EXPECT_EQ(decide("Now", R"({})").reason, "tool_not_granted");
}

TEST(DecideTest, NanAndOutOfDomainValuesAreInvalid) {
  auto snap = MustLoad("  - {user: alice, models: {m1: {temperature: {max: 1}}}}\n");
  PolicyRequest r = Req("alice");
  r.params.Set(Param::kTemperature, std::nan(""));
  EXPECT_EQ(Decide(*snap, r).reason, "invalid_request");
  r = Req("alice");
  r.params.Set(Param::kToolChoice, 17);
  EXPECT_EQ(Decide(*snap, r).reason, "invalid_request");
  r = Req("alice");
  r.params.Set(Param::kTopK, 2.5);
  EXPECT_EQ(Decide(*snap, r).reason, "invalid_request");
}

// --- tools ---

TEST(DecideTest, ToolsWithArgumentConstraints) {
  auto snap = MustLoad(
      "  - user: alice\n"
      "    tools:\n"
      "      read_file:\n"
      "        args:\n"
      "          path: {globs: [\"/workspace/**\"]}\n"
      "          mode: {one_of: [text, bytes]}\n"
      "      now: {}\n");
  PolicyRequest r = Req("alice", "");
  r.tools.push_back({"read_file", {{"path", "/workspace/a/b.txt"}, {"mode", "text"}}});
  r.tools.push_back({"now", {}});
  Decision d = Decide(*snap, r);
  EXPECT_EQ(d.verdict, Verdict::kAllow) << d.message;
  EXPECT_EQ(d.rule_id, "grants[0].tools.read_file");

  r.tools[0].args[0].second = "/workspace/../etc/passwd";
  d = Decide(*snap, r);
  EXPECT_EQ(d.reason, "tool_arguments_not_allowed");
  EXPECT_EQ(d.rule_id, "grants[0].tools.read_file.args.path");

  r.tools[0].args = {{"mode", "text"}};  // constrained argument missing: fails closed
  EXPECT_EQ(Decide(*snap, r).reason, "tool_arguments_not_allowed");

  r.tools[0].args = {{"path", "/workspace/x"}, {"mode", "exec"}};
  EXPECT_EQ(Decide(*snap, r).rule_id, "grants[0].tools.read_file.args.mode");

  r.tools[0].args = {{"path", "/workspace/x"}, {"path", "/etc/x"}, {"mode", "text"}};
  EXPECT_EQ(Decide(*snap, r).reason, "tool_arguments_not_allowed");

  r.tools = {{"delete_everything", {}}};
  d = Decide(*snap, r);
  EXPECT_EQ(d.reason, "tool_not_granted");
  EXPECT_EQ(d.rule_id, "default_deny");
}

// --- commands ---

std::shared_ptr<const Snapshot> CommandPolicy() {
  return MustLoad(
      "  - user: alice\n"
      "    commands:\n"
      "      - executable: /usr/bin/git\n"
      "        subcommands: [status, log]\n"
      "        forbidden_flags: [--output, -c]\n"
      "      - executable: /usr/bin/ls\n"
      "        allowed_flags: [-l, -a]\n"
      "        operands: {globs: [/workspace, \"/workspace/**\"]}\n"
      "        max_args: 3\n");
}

Decision RunArgv(const Snapshot& snap, std::vector<std::string> argv) {
  PolicyRequest r = Req("alice", "");
  r.commands.push_back(std::move(argv));
  return Decide(snap, r);
}

TEST(DecideTest, CommandSubcommandsAndForbiddenFlags) {
  auto snap = CommandPolicy();
  EXPECT_EQ(RunArgv(*snap, {"/usr/bin/git", "status"}).verdict, Verdict::kAllow);
  Decision d = RunArgv(*snap, {"/usr/bin/git", "log", "--output=/tmp/x"});
  EXPECT_EQ(d.reason, "command_arguments_not_allowed");
  EXPECT_EQ(d.rule_id, "grants[0].commands[0]");
  EXPECT_EQ(RunArgv(*snap, {"/usr/bin/git", "push"}).reason, "command_arguments_not_allowed");
  EXPECT_EQ(RunArgv(*snap, {"/usr/bin/git"}).reason, "command_arguments_not_allowed");
  // A string prefix is not a subcommand: "status-evil" is not "status".
  EXPECT_EQ(RunArgv(*snap, {"/usr/bin/git", "status-evil"}).verdict, Verdict::kDeny);
  // Global options before the subcommand are not allowed (argv[1] is the subcommand).
  EXPECT_EQ(RunArgv(*snap, {"/usr/bin/git", "-c", "core.pager=sh", "log"}).verdict, Verdict::kDeny);
  // A short forbidden flag inside a cluster.
  EXPECT_EQ(RunArgv(*snap, {"/usr/bin/git", "log", "-pc"}).verdict, Verdict::kDeny);
  // After "--" everything is an operand.
  EXPECT_EQ(RunArgv(*snap, {"/usr/bin/git", "log", "--", "--output"}).verdict, Verdict::kAllow);
}

TEST(DecideTest, CommandAllowedFlagsOperandsMaxArgs) {
  auto snap = CommandPolicy();
  EXPECT_EQ(RunArgv(*snap, {"/usr/bin/ls", "-la", "/workspace/src"}).verdict, Verdict::kAllow);
  EXPECT_EQ(RunArgv(*snap, {"/usr/bin/ls", "/workspace"}).verdict, Verdict::kAllow);
  EXPECT_EQ(RunArgv(*snap, {"/usr/bin/ls", "-R", "/workspace"}).verdict, Verdict::kDeny);
  EXPECT_EQ(RunArgv(*snap, {"/usr/bin/ls", "/etc"}).verdict, Verdict::kDeny);
  EXPECT_EQ(RunArgv(*snap, {"/usr/bin/ls", "/workspace/../etc"}).verdict, Verdict::kDeny);
  EXPECT_EQ(RunArgv(*snap, {"/usr/bin/ls", "/workspace/a", "/workspace/b", "/workspace/c",
                        "/workspace/d"})
                .verdict,
            Verdict::kDeny);
}

TEST(DecideTest, CommandExecutableMustBeResolved) {
  auto snap = CommandPolicy();
  EXPECT_EQ(RunArgv(*snap, {"git", "status"}).reason, "command_not_granted");
  EXPECT_EQ(RunArgv(*snap, {"/usr/bin/../bin/git", "status"}).reason, "command_not_granted");
  EXPECT_EQ(RunArgv(*snap, {"/usr/bin/gitx", "status"}).reason, "command_not_granted");
  EXPECT_EQ(RunArgv(*snap, {}).reason, "invalid_request");
  // Matching is on argv words, never on a joined string.
  EXPECT_EQ(RunArgv(*snap, {"/usr/bin/git status"}).reason, "command_not_granted");
}

// --- how grants combine ---

TEST(CombineTest, ModelsAreAUnionBoundsAreTheNarrowest) {
  auto snap = MustLoad(
      "  - group: devs\n"
      "    models:\n"
      "      m1: {max_tokens: {max: 1000, action: clamp}}\n"
      "  - group: ops\n"
      "    models:\n"
      "      m1: {max_tokens: {max: 500, action: clamp}}\n"
      "      m2: {}\n");
  // alice (devs) gets m1 only; bob (devs, ops) gets both, with the narrower bound.
  EXPECT_EQ(Decide(*snap, Req("alice", "m2")).reason, "model_not_granted");
  EXPECT_EQ(Decide(*snap, Req("bob", "m2")).verdict, Verdict::kAllow);
  Decision d = Decide(*snap, WithParam(Req("alice"), Param::kMaxTokens, "800"));
  EXPECT_EQ(d.verdict, Verdict::kAllow);
  d = Decide(*snap, WithParam(Req("bob"), Param::kMaxTokens, "800"));
  EXPECT_EQ(d.verdict, Verdict::kClamp);
  EXPECT_EQ(d.clamps[0].applied, "500");
  EXPECT_EQ(d.rule_id, "grants[1].models.m1.max_tokens");
}

TEST(CombineTest, RejectInAnyGrantWinsOverClamp) {
  auto snap = MustLoad(
      "  - {group: devs, models: {m1: {temperature: {max: 1.0, action: clamp}}}}\n"
      "  - {user: bob, models: {m1: {temperature: {max: 1.5, action: reject}}}}\n");
  EXPECT_EQ(Decide(*snap, WithParam(Req("bob"), Param::kTemperature, "1.2")).verdict,
            Verdict::kClamp);
  Decision d = Decide(*snap, WithParam(Req("bob"), Param::kTemperature, "1.8"));
  EXPECT_EQ(d.verdict, Verdict::kDeny);
  EXPECT_EQ(d.rule_id, "grants[1].models.m1.temperature");
}

TEST(CombineTest, ExplicitUserDenyBeatsGroupGrants) {
  auto snap = MustLoad(
      "  - user: bob\n"
      "    deny: {models: [m2], tools: [shell], commands: [/usr/bin/git]}\n"
      "  - group: ops\n"
      "    models: {m2: {}}\n"
      "    tools: {shell: {}}\n"
      "    commands: [{executable: /usr/bin/git}]\n");
  Decision d = Decide(*snap, Req("bob", "m2"));
  EXPECT_EQ(d.verdict, Verdict::kDeny);
  EXPECT_EQ(d.rule_id, "grants[0].deny.models[0]");
  PolicyRequest r = Req("bob", "");
  r.tools.push_back({"shell", {}});
  EXPECT_EQ(Decide(*snap, r).rule_id, "grants[0].deny.tools[0]");
  r.tools.clear();
  r.commands.push_back({"/usr/bin/git", "status"});
  EXPECT_EQ(Decide(*snap, r).rule_id, "grants[0].deny.commands[0]");
}

TEST(CombineTest, ToolConstraintsOfEveryGrantMustHold) {
  auto snap = MustLoad(
      "  - {group: devs, tools: {read: {args: {path: {globs: [\"/workspace/**\"]}}}}}\n"
      "  - {group: ops, tools: {read: {args: {path: {globs: [\"/**\"]}}}}}\n");
  PolicyRequest r = Req("bob", "");
  r.tools.push_back({"read", {{"path", "/etc/passwd"}}});
  // ops alone would allow it; devs' narrower constraint still holds for bob.
  EXPECT_EQ(Decide(*snap, r).reason, "tool_arguments_not_allowed");
  r.tools[0].args[0].second = "/workspace/a";
  EXPECT_EQ(Decide(*snap, r).verdict, Verdict::kAllow);
}

TEST(CombineTest, CommandRulesWithinAGrantAreAlternatives) {
  auto snap = MustLoad(
      "  - user: alice\n"
      "    commands:\n"
      "      - {executable: /usr/bin/git, subcommands: [status]}\n"
      "      - {executable: /usr/bin/git, subcommands: [log], max_args: 2}\n");
  EXPECT_EQ(RunArgv(*snap, {"/usr/bin/git", "status"}).verdict, Verdict::kAllow);
  Decision d = RunArgv(*snap, {"/usr/bin/git", "log"});
  EXPECT_EQ(d.verdict, Verdict::kAllow);
  EXPECT_EQ(d.rule_id, "grants[0].commands[1]");
  EXPECT_EQ(RunArgv(*snap, {"/usr/bin/git", "diff"}).verdict, Verdict::kDeny);
}

TEST(DecideTest, ForbiddenLongFlagsMatchTheirAbbreviations) {
  auto snap = MustLoad(
      "  - user: alice\n"
      "    commands:\n"
      "      - {executable: /usr/bin/git, subcommands: [log], forbidden_flags: [--output]}\n");
  EXPECT_EQ(RunArgv(*snap, {"/usr/bin/git", "log", "--outp=/tmp/x"}).verdict, Verdict::kDeny);
  EXPECT_EQ(RunArgv(*snap, {"/usr/bin/git", "log", "--output"}).verdict, Verdict::kDeny);
  EXPECT_EQ(RunArgv(*snap, {"/usr/bin/git", "log", "--oneline"}).verdict, Verdict::kAllow);
  EXPECT_EQ(RunArgv(*snap, {"/usr/bin/git", "log", "--o"}).verdict, Verdict::kDeny);  // ambiguous: denies more
}

TEST(DecideTest, RelativeOperandsAreMatchedAgainstTheCommandCwd) {
  auto snap = MustLoad(
      "  - user: alice\n"
      "    commands:\n"
      "      - {executable: /usr/bin/cat, operands: {globs: [\"/workspace/**\"]}}\n");
  PolicyRequest r = Req("alice", "");
  r.commands.push_back({"/usr/bin/cat", "src/a.c"});
  EXPECT_EQ(Decide(*snap, r).verdict, Verdict::kDeny);  // as written, not a /workspace path
  r.command_cwd = "/workspace";
  EXPECT_EQ(Decide(*snap, r).verdict, Verdict::kAllow);
  r.commands[0][1] = "../etc/passwd";
  Decision d = Decide(*snap, r);
  EXPECT_EQ(d.reason, "command_arguments_not_allowed");
  EXPECT_NE(d.message.find("(/etc/passwd)"), std::string::npos) << d.message;
}

TEST(CombineTest, BudgetsAreTheMinimumAndPriorityIsThePrincipals) {
  auto snap = MustLoad(
      "  - {group: devs, budgets: {tokens_per_day: 500, requests_per_minute: 100}}\n"
      "  - {user: bob, models: {m1: {}}, budgets: {tokens_per_day: 800, concurrent_requests: 1}}\n");
  Decision d = Decide(*snap, Req("bob"));
  EXPECT_EQ(d.budgets.tokens_per_day, 500);
  EXPECT_EQ(d.budgets.tokens_per_month, 10000);
  EXPECT_EQ(d.budgets.requests_per_minute, 10);  // a grant never raises the default
  EXPECT_EQ(d.budgets.concurrent_requests, 1);
  EXPECT_EQ(d.budgets.request_seconds, kDefaultRequestSeconds);  // no one set it
  EXPECT_EQ(d.priority, Priority::kBatch);
}

TEST(CombineTest, RequestSecondsIsNarrowedByGrantsAndNeverZero) {
  auto snap = MustLoad(
      "  - {group: devs, budgets: {request_seconds: 300}}\n"
      "  - {user: bob, models: {m1: {}}, budgets: {request_seconds: 60}}\n");
  EXPECT_EQ(Decide(*snap, Req("bob")).budgets.request_seconds, 60);
  snap = MustLoad(
      "  - {group: devs, budgets: {request_seconds: 300}}\n"
      "  - {user: bob, models: {m1: {}}, budgets: {request_seconds: 7200}}\n");
  EXPECT_EQ(Decide(*snap, Req("bob")).budgets.request_seconds, 300);  // never raised
  EXPECT_FALSE(LoadTestPolicy("  - {user: bob, models: {m1: {}}, budgets: {request_seconds: 0}}\n").ok());
  EXPECT_FALSE(
      LoadTestPolicy("  - {user: bob, models: {m1: {}}, budgets: {request_seconds: 99999999999}}\n").ok());
}

TEST(DecideTest, DecisionOrderModelBeforeToolsBeforeCommands) {
  auto snap = MustLoad("  - {user: alice, models: {m1: {top_k: {max: 10}}}}\n");
  PolicyRequest r = WithParam(Req("alice"), Param::kTopK, "50");
  r.tools.push_back({"t", {}});
  r.commands.push_back({"/bin/x"});
  EXPECT_EQ(Decide(*snap, r).reason, "parameter_out_of_range");
  r = Req("alice");
  r.tools.push_back({"t", {}});
  r.commands.push_back({"/bin/x"});
  EXPECT_EQ(Decide(*snap, r).reason, "tool_not_granted");
}

TEST(DecideTest, ToProtoCarriesEverything) {
  auto snap = MustLoad("  - {user: alice, models: {m1: {max_tokens: {max: 10, action: clamp}}}}\n");
  Decision d = Decide(*snap, WithParam(Req("alice"), Param::kMaxTokens, "99"));
  v1::PolicyDecision proto;
  ToProto(d, &proto);
  EXPECT_EQ(proto.verdict(), v1::VERDICT_CLAMP);
  EXPECT_EQ(proto.rule_id(), "grants[0].models.m1.max_tokens");
  EXPECT_EQ(proto.policy_sha256(), snap->sha256);
  EXPECT_EQ(proto.principal(), "alice");
  ASSERT_EQ(proto.clamps_size(), 1);
  EXPECT_EQ(proto.clamps(0).requested(), "99");
  EXPECT_EQ(proto.clamps(0).applied(), "10");
}

}  // namespace
}  // namespace gantry::policy

namespace gantry::policy {
namespace {

// A second key that a lenient reader takes for the constrained one (Go's encoding/json
// and cJSON match keys without regard to case; C strings stop at a NUL) is refused
// (red team F1): {"path": "/workspace/a", "Path": "/etc/shadow"}.
// parallel_tool_calls {allowed: false} under reject: an omitted value is true, which the
// bound refuses, but only where tools are offered; without tools there is no call.
TEST(DecideTest, ToolBoundsApplyOnlyWhereToolsAreOffered) {
  auto snap = MustLoad("  - {user: alice, models: {m1: {parallel_tool_calls: {allowed: false}}}}\n");
  PolicyRequest r = Req("alice");
  CompleteAsServed(&r, 1024);
  EXPECT_EQ(Decide(*snap, r).verdict, Verdict::kAllow);
  r.offered_tools = {"t"};
  CompleteAsServed(&r, 1024);
  EXPECT_EQ(Decide(*snap, r).reason, "parameter_out_of_range");
}

TEST(DecideTest, LookAlikeArgumentKeysAreRefused) {
  auto snap = MustLoad(
      "  - user: alice\n"
      "    tools:\n"
      "      read_file: {args: {path: {globs: [\"/workspace/**\"]}}}\n");
  auto decide = [&](const std::string& json) {
    PolicyRequest r = Req("alice");
    r.model.clear();
    r.tools.push_back(ToolCallFromJson("read_file", json));
    return Decide(*snap, r);
  };
  EXPECT_EQ(decide(R"({"path":"/workspace/a","limit":3})").verdict, Verdict::kAllow);
  for (const char* json : {R"({"path":"/workspace/a","Path":"/etc/shadow"})",
                           R"({"PATH":"/etc/shadow","path":"/workspace/a"})",
                           R"({"path":"/workspace/a","path\u0000":"/etc/shadow"})",
                           R"({"path":"/workspace/a","path ":"/etc/shadow"})"}) {
    Decision d = decide(json);
    EXPECT_EQ(d.reason, "tool_arguments_not_allowed") << json;
    EXPECT_EQ(d.rule_id, "grants[0].tools.read_file.args.path") << json;
  }
  // Unicode case folding maps the Kelvin sign onto k: "\u212aind" reads as "kind".
  auto kinds = MustLoad("  - {user: alice, tools: {open: {args: {kind: {one_of: [text]}}}}}\n");
  PolicyRequest r = Req("alice");
  r.model.clear();
  r.tools.push_back(ToolCallFromJson("open", "{\"kind\":\"text\",\"\xe2\x84\xaaind\":\"exec\"}"));
  EXPECT_EQ(Decide(*kinds, r).reason, "tool_arguments_not_allowed");
}

}  // namespace
}  // namespace gantry::policy
