#include "tokenizer-svc/conversation/conversation.h"

#include <gtest/gtest.h>

namespace gantry::conversation {
namespace {

TEST(ConversationTest, WhatRealClientsSendBecomesWhatTemplatesAccept) {
  v1::InferenceRequest r;
  auto* user = r.add_messages();
  user->set_role("user");
  user->set_content("Read index.html");
  auto* assistant = r.add_messages();
  assistant->set_role("assistant");
  assistant->set_content_null(true);  // Qwen Code
  auto* call = assistant->add_tool_calls();
  call->set_id("call_1");
  call->set_name("read_file");
  call->set_arguments_json("{\"path\": \"index.html\", \"limit\": 1.0}");
  auto* tool = r.add_messages();
  tool->set_role("tool");
  tool->set_tool_call_id("call_1");
  tool->set_content("<h1>Hi</h1>");
  auto* t = r.add_tools();
  t->set_name("read_file");
  t->set_parameters_json("{\"type\": \"object\"}");
  r.add_tools()->set_name("list_agents");  // no parameters, as Qwen Code sends three tools
  (*r.mutable_template_kwargs_json())["enable_thinking"] = "false";
  (*r.mutable_template_kwargs_json())["messages"] = "[]";  // cannot replace the messages
  EXPECT_EQ(json::DumpCompact(TemplateConversation(r)),
            "{\"messages\":[{\"role\":\"user\",\"content\":\"Read index.html\"},"
            "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"call_1\","
            "\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"arguments\":"
            "{\"path\":\"index.html\",\"limit\":1.0}}}]},{\"role\":\"tool\",\"content\":"
            "\"<h1>Hi</h1>\",\"tool_call_id\":\"call_1\"}],\"tools\":[{\"type\":\"function\","
            "\"function\":{\"name\":\"read_file\",\"parameters\":{\"type\":\"object\"}}},"
            "{\"type\":\"function\",\"function\":{\"name\":\"list_agents\"}}],"
            "\"add_generation_prompt\":true,\"enable_thinking\":false}");
}

// Kwargs cannot smuggle in what the policy checks or the bundle supplies.
TEST(ConversationTest, ReservedTemplateKwargsAreIgnored) {
  v1::InferenceRequest r;
  auto* user = r.add_messages();
  user->set_role("user");
  user->set_content("hi");
  r.set_reasoning_effort("low");
  auto& kwargs = *r.mutable_template_kwargs_json();
  kwargs["custom_tools"] = R"([{"type": "function", "function": {"name": "shell"}}])";
  kwargs["builtin_tools"] = R"(["code_interpreter"])";
  kwargs["reasoning_effort"] = R"("high")";
  kwargs["bos_token"] = R"("<|im_start|>")";
  kwargs["date_string"] = R"("26 Jul 2024")";
  EXPECT_EQ(json::DumpCompact(TemplateConversation(r)),
            "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
            "\"add_generation_prompt\":true,\"reasoning_effort\":\"low\","
            "\"date_string\":\"26 Jul 2024\"}");
}

}  // namespace
}  // namespace gantry::conversation
