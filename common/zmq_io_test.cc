// The ROUTER envelope split on real ZeroMQ sockets (a REQ and a DEALER peer over tcp
// loopback), plus the shapes a hostile peer can send.
#include "common/zmq_io.h"

#include <unistd.h>

#include "absl/strings/match.h"
#include "common/status.h"
#include "gtest/gtest.h"

namespace gantry {
namespace {

class RouterEnvelopeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    router_.set(zmq::sockopt::linger, 0);
    router_.bind("tcp://127.0.0.1:*");
    endpoint_ = LastEndpoint(router_);
  }
  // Receives one message on the ROUTER and splits it.
  absl::StatusOr<RouterEnvelope> Receive() {
    auto frames = RecvFrames(router_, 5000);
    if (!frames.ok()) return frames.status();
    return SplitRouterEnvelope(*std::move(frames));
  }
  // Replies "pong" behind `envelope` and expects the peer to receive exactly that.
  void ReplyReachesPeer(const std::vector<std::string>& envelope, zmq::socket_t& peer) {
    std::vector<std::string> reply = envelope;
    reply.push_back("pong");
    ASSERT_TRUE(SendFrames(router_, reply).ok());
    auto back = RecvFrames(peer, 5000);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, std::vector<std::string>{"pong"});
  }

  zmq::context_t context_{1};
  zmq::socket_t router_{context_, zmq::socket_type::router};
  std::string endpoint_;
};

TEST_F(RouterEnvelopeTest, ReqPeerKeepsTheDelimiterAndGetsItsReply) {
  zmq::socket_t req(context_, zmq::socket_type::req);
  req.set(zmq::sockopt::linger, 0);
  req.connect(endpoint_);
  ASSERT_TRUE(SendFrames(req, {"ping"}).ok());
  auto split = Receive();
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ(split->body, "ping");
  ASSERT_EQ(split->envelope.size(), 2u);
  EXPECT_FALSE(split->envelope[0].empty());  // the identity ROUTER assigned
  EXPECT_EQ(split->envelope[1], "");
  ReplyReachesPeer(split->envelope, req);
}

TEST_F(RouterEnvelopeTest, DealerPeerWithoutDelimiter) {
  zmq::socket_t dealer(context_, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.set(zmq::sockopt::routing_id, "dealer-1");
  dealer.connect(endpoint_);
  ASSERT_TRUE(SendFrames(dealer, {"ping"}).ok());
  auto split = Receive();
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ(split->envelope, std::vector<std::string>{"dealer-1"});
  EXPECT_EQ(split->body, "ping");
  ReplyReachesPeer(split->envelope, dealer);
}

TEST_F(RouterEnvelopeTest, OtherShapesAreProtocolErrors) {
  zmq::socket_t dealer(context_, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.connect(endpoint_);
  // Over the wire: an empty multipart would not be sent; these arrive as 3 and 4 frames.
  ASSERT_TRUE(SendFrames(dealer, {"not-empty", "body"}).ok());
  auto split = Receive();
  EXPECT_FALSE(split.ok());
  EXPECT_EQ(ReasonOf(split.status()), "protocol_error");
  ASSERT_TRUE(SendFrames(dealer, {"", "body", "extra"}).ok());
  EXPECT_FALSE(Receive().ok());
  // Without a socket: too few frames.
  for (const std::vector<std::string>& frames :
       {std::vector<std::string>{}, std::vector<std::string>{"id"}}) {
    auto bad = SplitRouterEnvelope(frames);
    EXPECT_FALSE(bad.ok());
    EXPECT_TRUE(absl::StrContains(bad.status().message(), "frames")) << bad.status();
  }
}

// Not waiting (timeout 0): nothing there is DEADLINE_EXCEEDED, a waiting multipart
// message comes whole, a message over the limits is dropped with protocol_error and the
// next one still arrives.
TEST_F(RouterEnvelopeTest, ReceiveWithoutWaiting) {
  EXPECT_TRUE(absl::IsDeadlineExceeded(RecvFrames(router_, 0).status()));
  zmq::socket_t dealer(context_, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.set(zmq::sockopt::routing_id, "d");
  dealer.connect(endpoint_);
  ASSERT_TRUE(SendFrames(dealer, {"", "a", "b"}).ok());
  ASSERT_TRUE(SendFrames(dealer, {"", std::string(100, 'x')}).ok());
  ASSERT_TRUE(SendFrames(dealer, {"", "c"}).ok());
  // Wait until all three are queued at the ROUTER, then take them without waiting.
  auto first = RecvFrames(router_, 5000);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, (std::vector<std::string>{"d", "", "a", "b"}));
  // The next message without waiting, asked again while it may still be on the wire.
  auto next_waiting = [&](const RecvLimits& limits) {
    absl::StatusOr<std::vector<std::string>> got;
    for (int i = 0; i < 500; ++i) {
      got = RecvFrames(router_, 0, limits);
      if (!absl::IsDeadlineExceeded(got.status())) break;
      usleep(10000);
    }
    return got;
  };
  RecvLimits small;
  small.max_total_bytes = 50;
  auto oversized = next_waiting(small);
  EXPECT_EQ(ReasonOf(oversized.status()), "protocol_error") << oversized.status();
  auto next = next_waiting(RecvLimits{});
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(*next, (std::vector<std::string>{"d", "", "c"}));
  EXPECT_TRUE(absl::IsDeadlineExceeded(RecvFrames(router_, 0).status()));
}

}  // namespace
}  // namespace gantry
