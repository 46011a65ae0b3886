// The tokenizer service with the real Qwen3 tokenizer and template, directly and over a
// real ZeroMQ socket on tcp loopback.
#include "tokenizer-svc/service/tokenizer_service.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>
#include <zmq.hpp>

#include "common/status.h"
#include "common/zmq_io.h"
#include "tokenizer-svc/conversation/conversation.h"

namespace gantry::tokenizer_service {
namespace {

class TokenizerServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* ref = std::getenv("GANTRY_REFERENCE_DIR");
    ASSERT_NE(ref, nullptr) << "GANTRY_REFERENCE_DIR unset: run through tests/run";
    auto model = LoadServedModel(std::string(ref) + "/tokenizers/qwen3");
    ASSERT_TRUE(model.ok()) << model.status();
    std::map<std::string, ServedModel> models;
    models.emplace("qwen3", std::move(*model));
    service_ = new TokenizerService(std::move(models));
  }

  static v1::InferenceRequest Chat(const std::string& text) {
    v1::InferenceRequest r;
    auto* m = r.add_messages();
    m->set_role("user");
    m->set_content(text);
    return r;
  }

  static TokenizerService* service_;
};
TokenizerService* TokenizerServiceTest::service_ = nullptr;

TEST_F(TokenizerServiceTest, TokenizeDetokenizeAndSplitSpecial) {
  v1::TokenizerRequest request;
  request.set_request_id("t1");
  request.set_model("qwen3");
  request.mutable_tokenize()->set_text("Hi <|im_start|>");
  auto parsed = service_->Handle(request);
  ASSERT_EQ(parsed.status().code(), "OK") << parsed.status().message();
  EXPECT_EQ(parsed.request_id(), "t1");
  // The HF reference: "Hi <|im_start|>" -> [13048, 220, 151644] with specials parsed.
  ASSERT_EQ(parsed.ids_size(), 3);
  EXPECT_EQ(parsed.ids(2), 151644);
  EXPECT_EQ(parsed.ids_sha256().size(), 64u);
  request.mutable_tokenize()->set_split_special(true);
  auto split = service_->Handle(request);
  EXPECT_GT(split.ids_size(), 3);
  for (int32_t id : split.ids()) EXPECT_NE(id, 151644);  // typed text never becomes control
  v1::TokenizerRequest back;
  back.set_model("qwen3");
  for (int32_t id : split.ids()) back.mutable_detokenize()->add_ids(id);
  EXPECT_EQ(service_->Handle(back).text(), "Hi <|im_start|>");
}

TEST_F(TokenizerServiceTest, RenderAndCountAreThePromptAWorkerRuns) {
  v1::TokenizerRequest render;
  render.set_model("qwen3");
  *render.mutable_render() = Chat("Hello");
  auto rendered = service_->Handle(render);
  ASSERT_EQ(rendered.status().code(), "OK");
  EXPECT_EQ(rendered.text(), "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n");
  v1::TokenizerRequest count;
  count.set_model("qwen3");
  *count.mutable_count() = Chat("Hello");
  auto counted = service_->Handle(count);
  ASSERT_EQ(counted.status().code(), "OK");
  EXPECT_EQ(counted.count(), 9u);  // <|im_start|> user \n Hello <|im_end|> \n <|im_start|> assistant \n
  EXPECT_EQ(counted.ids_sha256().size(), 64u);
  // The same prompt hashes the same; another prompt does not.
  EXPECT_EQ(service_->Handle(count).ids_sha256(), counted.ids_sha256());
  *count.mutable_count() = Chat("Hello!");
  EXPECT_NE(service_->Handle(count).ids_sha256(), counted.ids_sha256());
}

TEST_F(TokenizerServiceTest, ErrorsHaveStableReasons) {
  v1::TokenizerRequest unknown;
  unknown.set_model("gpt-9");
  unknown.mutable_tokenize()->set_text("x");
  EXPECT_EQ(service_->Handle(unknown).status().reason(), "model_not_found");
  v1::TokenizerRequest empty;
  empty.set_model("qwen3");
  EXPECT_EQ(service_->Handle(empty).status().reason(), "invalid_request");
  v1::TokenizerRequest bad_utf8;
  bad_utf8.set_model("qwen3");
  bad_utf8.mutable_count()->add_messages()->set_role("user");
  bad_utf8.mutable_count()->mutable_messages(0)->set_content("");
  EXPECT_EQ(service_->Handle(bad_utf8).status().code(), "OK");
}

// One request's work and answer are bounded (a red team's 50 MB Detokenize of ids of
// 128 spaces made a 1.6 GB answer): more ids than 262,144 to detokenize, an answer over
// 16 MiB, a text of more ids than that to tokenize are each refused with a stable code.
TEST_F(TokenizerServiceTest, OneRequestsWorkAndAnswerAreBounded) {
  v1::TokenizerRequest one;
  one.set_model("qwen3");
  one.mutable_detokenize()->add_ids(56940);
  auto spaces = service_->Handle(one);
  ASSERT_EQ(spaces.status().code(), "OK");
  ASSERT_EQ(spaces.text(), std::string(128, ' '));  // the vocabulary's longest piece

  v1::TokenizerRequest too_many;
  too_many.set_model("qwen3");
  for (int i = 0; i < (1 << 18) + 1; ++i) too_many.mutable_detokenize()->add_ids(220);
  auto refused = service_->Handle(too_many);
  EXPECT_EQ(refused.status().reason(), "invalid_request") << refused.status().message();
  EXPECT_TRUE(refused.text().empty());

  v1::TokenizerRequest too_long;  // 140,000 ids, 17.9 MB of text
  too_long.set_model("qwen3");
  for (int i = 0; i < 140000; ++i) too_long.mutable_detokenize()->add_ids(56940);
  auto long_answer = service_->Handle(too_long);
  EXPECT_EQ(long_answer.status().reason(), "invalid_request") << long_answer.status().message();
  EXPECT_TRUE(long_answer.text().empty());

  v1::TokenizerRequest words;  // about 1.3 million ids
  words.set_model("qwen3");
  std::string text;
  for (int i = 0; i < 650000; ++i) text += " a b";
  words.mutable_tokenize()->set_text(text);
  auto counted = service_->Handle(words);
  EXPECT_EQ(counted.status().code(), "OUT_OF_RANGE") << counted.status().message();
  EXPECT_EQ(counted.ids_size(), 0);
}

TEST_F(TokenizerServiceTest, ServesOverZeroMqAndSurvivesGarbage) {
  std::thread server([] { (void)service_->Serve("tcp://127.0.0.1:*"); });
  std::string endpoint;
  for (int i = 0; i < 500 && endpoint.empty(); ++i) {
    endpoint = service_->endpoint();
    if (endpoint.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_FALSE(endpoint.empty());
  zmq::context_t context;
  zmq::socket_t req(context, zmq::socket_type::req);
  req.set(zmq::sockopt::linger, 0);
  req.connect(endpoint);
  v1::TokenizerRequest request;
  request.set_request_id("z1");
  request.set_model("qwen3");
  request.mutable_tokenize()->set_text("hello world");
  ASSERT_TRUE(SendFrames(req, {request.SerializeAsString()}).ok());
  auto reply = RecvFrames(req, 5000);
  ASSERT_TRUE(reply.ok()) << reply.status();
  v1::TokenizerResponse response;
  ASSERT_TRUE(response.ParseFromString(reply->back()));
  EXPECT_EQ(response.request_id(), "z1");
  EXPECT_EQ(response.ids_size(), 2);
  // Garbage gets an answer, not a crash; the next request still works.
  ASSERT_TRUE(SendFrames(req, {"\xff\xff\xff not a proto"}).ok());
  reply = RecvFrames(req, 5000);
  ASSERT_TRUE(reply.ok());
  ASSERT_TRUE(response.ParseFromString(reply->back()));
  EXPECT_EQ(response.status().reason(), "protocol_error");
  ASSERT_TRUE(SendFrames(req, {request.SerializeAsString()}).ok());
  reply = RecvFrames(req, 5000);
  ASSERT_TRUE(reply.ok());
  ASSERT_TRUE(response.ParseFromString(reply->back()));
  EXPECT_EQ(response.status().code(), "OK");
  // A DEALER without the empty delimiter is served too.
  zmq::socket_t dealer(context, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.connect(endpoint);
  ASSERT_TRUE(SendFrames(dealer, {request.SerializeAsString()}).ok());
  reply = RecvFrames(dealer, 5000);
  ASSERT_TRUE(reply.ok());
  ASSERT_TRUE(response.ParseFromString(reply->back()));
  EXPECT_EQ(response.ids_size(), 2);
  service_->Stop();
  server.join();
}

}  // namespace
}  // namespace gantry::tokenizer_service
