// SandboxClient against a scripted sandbox on a real Unix socket: results come back
// under their call id, and a refusal of the caller or its workspace by the service is
// an error that ends the task, not an observation for the model.
#include "harness-svc/sandbox_client.h"

#include <stdlib.h>
#include <unistd.h>

#include <thread>

#include <zmq.hpp>

#include "absl/strings/str_cat.h"
#include "common/error_codes.h"
#include "common/status.h"
#include "common/zmq_io.h"
#include "gtest/gtest.h"

namespace gantry::harness {
namespace {

// Answers each call with `reason` ("" for a plain TOOL_RAN), until `calls` are done.
class ScriptedSandbox {
 public:
  explicit ScriptedSandbox(std::vector<std::string> reasons) {
    char dir[] = "/tmp/gantry-client-XXXXXX";
    EXPECT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    endpoint_ = absl::StrCat("ipc://", dir_, "/s.sock");
    router_.set(zmq::sockopt::linger, 0);
    router_.bind(endpoint_);
    thread_ = std::thread([this, reasons] {
      for (const auto& reason : reasons) {
        auto frames = RecvFrames(router_, 10000);
        if (!frames.ok()) return;
        auto split = SplitRouterEnvelope(*std::move(frames));
        if (!split.ok()) return;
        v1::ToolCall call;
        call.ParseFromString(split->body);
        v1::ToolResult r;
        r.set_call_id(call.call_id());
        if (reason.empty()) {
          r.set_outcome(v1::TOOL_RAN);
          r.set_stdout("ran\n");
        } else {
          r.set_outcome(v1::TOOL_ERROR);
          ToProto(ReasonError(reason, "refused by the script"), r.mutable_error());
        }
        std::vector<std::string> reply = split->envelope;
        reply.push_back(r.SerializeAsString());
        (void)SendFrames(router_, reply);
      }
    });
  }
  ~ScriptedSandbox() {
    thread_.join();
    router_.close();
    unlink((dir_ + "/s.sock").c_str());
    rmdir(dir_.c_str());
  }
  const std::string& endpoint() const { return endpoint_; }

 private:
  std::string dir_, endpoint_;
  zmq::context_t context_{1};
  zmq::socket_t router_{context_, zmq::socket_type::router};
  std::thread thread_;
};

v1::ToolCall Call(const std::string& id) {
  v1::ToolCall c;
  c.set_call_id(id);
  c.mutable_exec()->add_argv("true");
  return c;
}

TEST(SandboxClient, ResultsPassAndServiceRefusalsAreErrors) {
  const std::vector<std::string> refusals = {"sandbox_peer_unknown", "sandbox_principal_mismatch",
                                             "sandbox_workspace_outside_roots",
                                             "sandbox_workspace_unsafe"};
  std::vector<std::string> script = {"", "internal"};
  script.insert(script.end(), refusals.begin(), refusals.end());
  ScriptedSandbox sandbox(script);
  SandboxClient client(sandbox.endpoint());
  auto ran = client.Execute(Call("call_1"), 10000);
  ASSERT_TRUE(ran.ok()) << ran.status();
  EXPECT_EQ(ran->stdout(), "ran\n");
  // A sandbox failure of one call is still that call's result.
  auto failed = client.Execute(Call("call_2"), 10000);
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_EQ(failed->error().reason(), "internal");
  for (const auto& reason : refusals) {
    auto refused = client.Execute(Call("call_" + reason), 10000);
    ASSERT_FALSE(refused.ok()) << reason;
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied) << reason;
    EXPECT_EQ(ReasonOf(refused.status()), reason);
  }
}

}  // namespace
}  // namespace gantry::harness
