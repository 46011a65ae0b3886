// The worker side of GNTW/1 against a router played by the test: a real ROUTER socket
// on tcp loopback, real frames, the real engine on a real bundle (scripted sampler).
#include "worker/server/worker_loop.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <zmq.hpp>

#include "common/status.h"
#include "common/zmq_io.h"
#include "proto/worker_frames.h"
#include "worker/server/serving.h"
#include "worker/server/test_bundle.h"

namespace gantry::server {
namespace {

class WorkerLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = TestBundleDirForTest(true);
    ASSERT_TRUE(dir.ok()) << dir.status();
    const char* tmp = std::getenv("TEST_TMPDIR");
    std::string script = std::string(tmp ? tmp : "/tmp") + "/loop-script.yaml";
    FILE* f = std::fopen(script.c_str(), "w");
    std::string words;
    for (int i = 0; i < 150; ++i) words += " word";
    std::fprintf(f, "- match: \"long\"\n  emit: \"%s\"\n- match: \"\"\n  emit: \"Short answer.\"\n", words.c_str());
    std::fclose(f);
    auto loaded = LoadedBundle::Load(*dir, script);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    loaded_ = std::move(*loaded);
    router_.set(zmq::sockopt::router_mandatory, 1);
    router_.set(zmq::sockopt::linger, 0);
    router_.bind("tcp://127.0.0.1:*");
    WorkerOptions options;
    options.router_endpoint = LastEndpoint(router_);
    options.worker_id = "test-worker";
    options.slots = 1;
    options.capacity_per_slot = 512;
    options.heartbeat_interval_ms = 200;
    options.drain_timeout_ms = drain_timeout_ms_;
    loop_ = std::make_unique<WorkerLoop>(options, loaded_->serving());
    thread_ = std::thread([this] { loop_->Run(); });
  }

  void TearDown() override {
    if (loop_) loop_->Stop();
    if (thread_.joinable()) thread_.join();
  }

  // Next message from the worker that is not a HEARTBEAT.
  wire::WorkerMessage Next(int timeout_ms = 10000, bool skip_heartbeats = true) {
    for (;;) {
      auto frames = RecvFrames(router_, timeout_ms);
      EXPECT_TRUE(frames.ok()) << frames.status();
      if (!frames.ok()) return v1::Disconnect();
      identity_ = frames->front();
      frames->erase(frames->begin());
      auto m = wire::DecodeFrames(*frames, wire::Direction::kWorkerToRouter);
      EXPECT_TRUE(m.ok()) << m.status();
      if (!m.ok()) return v1::Disconnect();
      if (skip_heartbeats && std::holds_alternative<v1::Heartbeat>(*m)) continue;
      return *m;
    }
  }

  void Send(const wire::WorkerMessage& m) {
    auto frames = wire::EncodeFrames(m);
    frames.insert(frames.begin(), identity_);
    ASSERT_TRUE(SendFrames(router_, frames).ok());
  }

  v1::Request MakeRequest(const std::string& id, const std::string& text, uint32_t max_tokens = 200) {
    v1::Request r;
    r.mutable_request()->set_request_id(id);
    r.mutable_request()->set_principal("alice");
    r.mutable_request()->set_max_tokens(max_tokens);
    auto* m = r.mutable_request()->add_messages();
    m->set_role("user");
    m->set_content(text);
    return r;
  }

  // Collects a request's stream until its FINAL.
  std::string Collect(const std::string& id, v1::Terminal* terminal) {
    std::string text;
    for (;;) {
      wire::WorkerMessage m = Next();
      if (auto* p = std::get_if<v1::Partial>(&m)) {
        EXPECT_EQ(p->request_id(), id);
        for (const auto& e : p->events()) text += e.text().text();
      } else if (auto* f = std::get_if<v1::Final>(&m)) {
        if (f->request_id() != id) continue;
        *terminal = f->terminal().terminal();
        return text;
      } else {
        ADD_FAILURE() << "unexpected command " << wire::CommandName(wire::CommandOf(m));
        return text;
      }
    }
  }

  int drain_timeout_ms_ = 30000;
  zmq::context_t context_;
  zmq::socket_t router_{context_, zmq::socket_type::router};
  std::unique_ptr<LoadedBundle> loaded_;
  std::unique_ptr<WorkerLoop> loop_;
  std::thread thread_;
  std::string identity_;
};

TEST_F(WorkerLoopTest, ReadyRequestPartialsFinal) {
  wire::WorkerMessage first = Next();
  ASSERT_TRUE(std::holds_alternative<v1::Ready>(first));
  const v1::Ready& ready = std::get<v1::Ready>(first);
  EXPECT_EQ(ready.worker_id(), "test-worker");
  EXPECT_EQ(ready.slots(), 1u);
  EXPECT_EQ(ready.free_slots(), 1u);
  EXPECT_EQ(ready.bundle().model(), "test-qwen3");
  EXPECT_EQ(ready.bundle().identity_sha256(), loaded_->serving().identity.identity_sha256());
  // The KV pool: one slot's 512 tokens (and the block a copy-on-write takes), none used.
  EXPECT_EQ(ready.kv_cache().block_tokens(), 32u);
  EXPECT_EQ(ready.kv_cache().blocks(), 512u / 32 + 1);
  EXPECT_EQ(ready.kv_cache().blocks_in_use(), 0u);
  EXPECT_EQ(ready.kv_cache().bytes(), ready.kv_cache().blocks() * model::KvPool::BlockBytes(
                                          loaded_->serving().model->config(), model::KvType::kF16));
  EXPECT_EQ(ready.kv_cache().type(), "f16");
  Send(MakeRequest("req_a", "hello"));
  v1::Terminal terminal;
  EXPECT_EQ(Collect("req_a", &terminal), "Short answer.");
  EXPECT_EQ(terminal.finish_reason(), v1::FINISH_STOP);
  EXPECT_EQ(terminal.bundle().identity_sha256(), ready.bundle().identity_sha256());
  // Heartbeats then say the request's blocks are cached for reuse, none in use.
  for (int i = 0; i < 20; ++i) {
    wire::WorkerMessage m = Next(10000, /*skip_heartbeats=*/false);
    const auto* hb = std::get_if<v1::Heartbeat>(&m);
    if (!hb || hb->kv_cache().blocks_cached() == 0) continue;
    EXPECT_EQ(hb->kv_cache().blocks_in_use(), 0u);
    EXPECT_EQ(hb->kv_cache().blocks(), ready.kv_cache().blocks());
    return;
  }
  ADD_FAILURE() << "no heartbeat reported cached blocks";
}

TEST_F(WorkerLoopTest, CancelStopsWithinADecodeStepAndTheNextRequestIsServed) {
  ASSERT_TRUE(std::holds_alternative<v1::Ready>(Next()));
  Send(MakeRequest("req_long", "a long one please"));
  // Wait for the first streamed text, then cancel.
  wire::WorkerMessage m = Next();
  ASSERT_TRUE(std::holds_alternative<v1::Partial>(m));
  v1::Cancel cancel;
  cancel.set_request_id("req_long");
  Send(cancel);
  v1::Terminal terminal;
  std::string rest = Collect("req_long", &terminal);
  EXPECT_EQ(terminal.finish_reason(), v1::FINISH_CANCELLED);
  EXPECT_LT(terminal.usage().completion_tokens(), 150u);
  Send(MakeRequest("req_next", "hello"));
  EXPECT_EQ(Collect("req_next", &terminal), "Short answer.");
  EXPECT_EQ(terminal.finish_reason(), v1::FINISH_STOP);
}

// Each PARTIAL carries the running count of tokens generated, and the FINAL of a
// cancelled request the work done: the prompt it evaluated and every token generated.
TEST_F(WorkerLoopTest, PartialsCountTokensAndACancelledFinalCarriesTheUsage) {
  ASSERT_TRUE(std::holds_alternative<v1::Ready>(Next()));
  Send(MakeRequest("req_long", "a long one please"));
  uint32_t counted = 0;
  int events = 0;
  for (int partials = 0; partials < 3;) {
    wire::WorkerMessage m = Next();
    auto* p = std::get_if<v1::Partial>(&m);
    ASSERT_NE(p, nullptr) << wire::CommandName(wire::CommandOf(m));
    events += p->events_size();
    EXPECT_GE(p->completion_tokens(), counted);  // never goes back
    EXPECT_GE(p->completion_tokens(), static_cast<uint32_t>(events));
    counted = p->completion_tokens();
    ++partials;
  }
  v1::Cancel cancel;
  cancel.set_request_id("req_long");
  Send(cancel);
  v1::Terminal terminal;
  for (;;) {
    wire::WorkerMessage m = Next();
    if (auto* p = std::get_if<v1::Partial>(&m)) {
      counted = std::max(counted, p->completion_tokens());
      continue;
    }
    auto* f = std::get_if<v1::Final>(&m);
    ASSERT_NE(f, nullptr);
    terminal = f->terminal().terminal();
    break;
  }
  EXPECT_EQ(terminal.finish_reason(), v1::FINISH_CANCELLED);
  EXPECT_GT(terminal.usage().prompt_tokens(), 0u);  // the prefill was done
  EXPECT_EQ(terminal.usage().prompt_ids_sha256().size(), 64u);
  // Every token the PARTIALs counted, and at most the one being decoded when the CANCEL
  // came; far from the 150 words of the whole answer.
  EXPECT_GE(terminal.usage().completion_tokens(), counted);
  EXPECT_LE(terminal.usage().completion_tokens(), counted + 1);
  EXPECT_LT(terminal.usage().completion_tokens(), 150u);
}

TEST_F(WorkerLoopTest, MoreRequestsThanSlotsAreRefusedNotQueued) {
  ASSERT_TRUE(std::holds_alternative<v1::Ready>(Next()));
  Send(MakeRequest("req_1", "a long one please"));
  Send(MakeRequest("req_2", "hello"));
  bool refused = false, finished = false;
  while (!(refused && finished)) {
    wire::WorkerMessage m = Next();
    if (auto* f = std::get_if<v1::Final>(&m)) {
      if (f->request_id() == "req_2") {
        EXPECT_EQ(f->terminal().terminal().status().reason(), "queue_full");
        refused = true;
      } else {
        EXPECT_EQ(f->request_id(), "req_1");
        finished = true;
      }
    }
  }
}

TEST_F(WorkerLoopTest, HeartbeatsFlowAndReportFreeSlots) {
  ASSERT_TRUE(std::holds_alternative<v1::Ready>(Next()));
  wire::WorkerMessage m = Next(5000, /*skip_heartbeats=*/false);
  ASSERT_TRUE(std::holds_alternative<v1::Heartbeat>(m));
  EXPECT_EQ(std::get<v1::Heartbeat>(m).free_slots(), 1u);
}

TEST_F(WorkerLoopTest, SilentRouterMakesTheWorkerReconnectWithReady) {
  ASSERT_TRUE(std::holds_alternative<v1::Ready>(Next()));
  // Say nothing for longer than liveness x interval (3 x 200 ms): a new READY follows.
  for (;;) {
    wire::WorkerMessage m = Next(5000, /*skip_heartbeats=*/true);
    if (std::holds_alternative<v1::Ready>(m)) break;
  }
}

// DRAINING (docs/protocol.md, "Worker states"): after Stop() the heartbeats say 0 free
// slots, a new REQUEST is refused no_worker, the one in flight runs to its end, and
// then the worker says DISCONNECT (no_worker) and its loop returns.
TEST_F(WorkerLoopTest, StopDrainsWhatIsInFlightThenDisconnects) {
  ASSERT_TRUE(std::holds_alternative<v1::Ready>(Next()));
  Send(MakeRequest("req_1", "a long one please"));
  wire::WorkerMessage first = Next();
  ASSERT_TRUE(std::holds_alternative<v1::Partial>(first));
  loop_->Stop();
  bool saw_no_free = false, refused = false, finished = false;
  for (;;) {
    wire::WorkerMessage m = Next(10000, /*skip_heartbeats=*/false);
    if (auto* hb = std::get_if<v1::Heartbeat>(&m)) {
      if (hb->free_slots() == 0 && !saw_no_free) {
        saw_no_free = true;
        Send(MakeRequest("req_2", "hello"));
      }
    } else if (auto* f = std::get_if<v1::Final>(&m)) {
      if (f->request_id() == "req_2") {
        EXPECT_EQ(f->terminal().terminal().status().reason(), "no_worker");
        refused = true;
      } else {
        EXPECT_EQ(f->request_id(), "req_1");
        EXPECT_NE(f->terminal().terminal().finish_reason(), v1::FINISH_CANCELLED);
        EXPECT_NE(f->terminal().terminal().finish_reason(), v1::FINISH_ERROR);
        finished = true;
      }
    } else if (auto* d = std::get_if<v1::Disconnect>(&m)) {
      EXPECT_EQ(d->reason().reason(), "no_worker");
      break;
    }
  }
  EXPECT_TRUE(saw_no_free);
  EXPECT_TRUE(refused);
  EXPECT_TRUE(finished);  // before the DISCONNECT
  thread_.join();         // the loop has returned
}

class WorkerLoopDrainDeadlineTest : public WorkerLoopTest {
 protected:
  void SetUp() override {
    drain_timeout_ms_ = 0;
    WorkerLoopTest::SetUp();
  }
};

// Past the drain deadline what is left is cancelled: its FINAL (cancelled, with the
// usage so far) still reaches the router before the DISCONNECT.
TEST_F(WorkerLoopDrainDeadlineTest, WhatIsLeftAtTheDeadlineIsCancelledBeforeTheDisconnect) {
  ASSERT_TRUE(std::holds_alternative<v1::Ready>(Next()));
  Send(MakeRequest("req_1", "a long one please"));
  ASSERT_TRUE(std::holds_alternative<v1::Partial>(Next()));
  loop_->Stop();
  v1::Terminal terminal;
  Collect("req_1", &terminal);
  EXPECT_EQ(terminal.finish_reason(), v1::FINISH_CANCELLED);
  EXPECT_GT(terminal.usage().completion_tokens(), 0u);
  wire::WorkerMessage m = Next();
  ASSERT_TRUE(std::holds_alternative<v1::Disconnect>(m));
  thread_.join();
}

}  // namespace
}  // namespace gantry::server
