// ChatTemplate on real model templates: the Llama-3 template of tests/data against transformers'
// apply_chat_template output (text and token ids), the Llama-2, Mistral-Instruct and ChatML/Qwen2
// templates against hand-derived prompts, tokenizer_config.json loading, and the fallback template.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "pagoda/core/error.h"
#include "pagoda/tokenizer/chat_template.h"
#include "tokenizer_test_util.h"

namespace pagoda::test {
namespace {

using nlohmann::json;

// Public templates as published in the models' tokenizer_config.json files.
const char* kLlama2Template =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
    "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
    "{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
    "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}"
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";

const char* kMistralTemplate =
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token + ' ' }}"
    "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}";

const char* kQwen2Template =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

// A multi-line ChatML template in the style of recent models: indentation, "-" modifiers, trim_blocks and
// lstrip_blocks all decide the output.
const char* kMultiLineChatML = R"({#- A multi-line ChatML template. -#}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] | trim %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set system_message = 'Default system.' %}
    {%- set loop_messages = messages %}
{%- endif %}
{{- bos_token }}
{{- '<|im_start|>system\n' + system_message + '<|im_end|>\n' }}
{%- for message in loop_messages %}
    {%- if message.role not in ['user', 'assistant'] %}
        {{- raise_exception('Unsupported role: ' + message.role) }}
    {%- endif %}
<|im_start|>{{ message.role }}
{{ message.content | trim }}<|im_end|>
{% endfor %}
{%- if add_generation_prompt %}
<|im_start|>assistant
{% endif %}
)";

const json kWithSystem = json::parse(R"([{"role": "system", "content": "You are helpful."},
  {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
  {"role": "user", "content": "  How are you?  "}])");
const json kNoSystem = json::parse(R"([{"role": "user", "content": "Hi"},
  {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "How are you?"}])");
const json kNotAlternating = json::parse(R"([{"role": "user", "content": "Hi"}, {"role": "user", "content": "Again"}])");

std::string render(const char* tmpl, const json& messages, bool add_generation_prompt = true) {
  ChatTemplate t(tmpl, "<s>", "</s>");
  return t.render({.messages = messages, .add_generation_prompt = add_generation_prompt});
}

std::string raised(const char* tmpl, const json& messages) {
  try {
    render(tmpl, messages);
  } catch (const InvalidRequest& e) {
    return e.what();
  }
  return "(nothing raised)";
}

TEST(ChatTemplate, Llama3MatchesTransformers) {
  json refs = read_json(data_path("refs/hf_tiny-llama3-hf.json"));
  auto tmpl = ChatTemplate::from_tokenizer_config(data_path("models/tiny-llama3-hf/tokenizer_config.json"));
  ASSERT_NE(tmpl, nullptr);
  ASSERT_EQ(refs["chat"].size(), 3u);
  for (const auto& c : refs["chat"]) {
    std::string expected = c["prompt"];
    SCOPED_TRACE(expected);
    std::string prompt = tmpl->render({.messages = c["messages"], .add_generation_prompt = true});
    EXPECT_EQ(prompt, expected);
    EXPECT_EQ(llama3_tokenizer().encode(prompt, {.add_special_tokens = false}), ids_of(c["ids"]));
  }
}

TEST(ChatTemplate, Llama3FirstPrompt) {
  auto tmpl = ChatTemplate::from_tokenizer_config(data_path("models/tiny-llama3-hf/tokenizer_config.json"));
  ASSERT_NE(tmpl, nullptr);
  json messages = json::parse(R"([{"role": "user", "content": "  Hi there \n"}])");
  // "| trim" applies to the content only; the header and <|eot_id|> are concatenated around it.
  EXPECT_EQ(tmpl->render({.messages = messages}),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, Llama2WithSystemPrompt) {
  const std::string expected =
      "<s>[INST] <<SYS>>\nYou are helpful.\n<</SYS>>\n\nHi [/INST] Hello! </s><s>[INST] How are you? [/INST]";
  EXPECT_EQ(render(kLlama2Template, kWithSystem), expected);
  EXPECT_EQ(render(kLlama2Template, kWithSystem, false), expected);  // the template ignores the flag
}

TEST(ChatTemplate, Llama2WithoutSystemPrompt) {
  EXPECT_EQ(render(kLlama2Template, kNoSystem), "<s>[INST] Hi [/INST] Hello! </s><s>[INST] How are you? [/INST]");
}

TEST(ChatTemplate, Llama2RejectsNonAlternatingRoles) {
  EXPECT_EQ(raised(kLlama2Template, kNotAlternating), "Conversation roles must alternate user/assistant/user/assistant/...");
}

TEST(ChatTemplate, MistralInstruct) {
  EXPECT_EQ(render(kMistralTemplate, kNoSystem), "<s>[INST] Hi [/INST]Hello!</s> [INST] How are you? [/INST]");
  // Mistral's first template has no system role: a system message breaks the alternation check.
  EXPECT_EQ(raised(kMistralTemplate, kWithSystem), "Conversation roles must alternate user/assistant/user/assistant/...");
  EXPECT_EQ(raised(kMistralTemplate, kNotAlternating), "Conversation roles must alternate user/assistant/user/assistant/...");
  EXPECT_EQ(raised(kMistralTemplate, json::parse(R"([{"role": "user", "content": "a"}, {"role": "tool", "content": "b"}])")),
            "Only user and assistant roles are supported!");
}

TEST(ChatTemplate, Qwen2ChatML) {
  EXPECT_EQ(render(kQwen2Template, kWithSystem),
            "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\n  How are you?  <|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(render(kQwen2Template, kNoSystem, false),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nHow are you?<|im_end|>\n");
}

TEST(ChatTemplate, MultiLineTemplateWhitespace) {
  EXPECT_EQ(render(kMultiLineChatML, kWithSystem),
            "<s><|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nHow are you?<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(render(kMultiLineChatML, kNoSystem, false),
            "<s><|im_start|>system\nDefault system.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nHow are you?<|im_end|>\n");
  EXPECT_EQ(raised(kMultiLineChatML, json::parse(R"([{"role": "tool", "content": "x"}])")), "Unsupported role: tool");
}

TEST(ChatTemplate, FallbackIsChatML) {
  auto tmpl = ChatTemplate::fallback();
  json messages = json::parse(R"([{"role": "system", "content": "S"},
    {"role": "user", "content": [{"type": "text", "text": "U1"}, {"type": "image"}, {"type": "text", "text": "U2"}]}])");
  EXPECT_EQ(tmpl->render({.messages = messages, .add_generation_prompt = true}),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU1U2<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(tmpl->render({.messages = messages, .add_generation_prompt = false}),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU1U2<|im_end|>\n");
}

class ChatTemplateConfig : public ::testing::Test {
 protected:
  std::string write_config(const json& config) {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("chat_template_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::create_directories(dir_);
    std::string path = (dir_ / "tokenizer_config.json").string();
    std::ofstream(path) << config.dump();
    return path;
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::filesystem::path dir_;
};

TEST_F(ChatTemplateConfig, NamedTemplatesTakeDefaultAndTokenObjects) {
  json config = {{"bos_token", {{"__type", "AddedToken"}, {"content", "<B>"}}},
                 {"eos_token", "<E>"},
                 {"chat_template", json::array({{{"name", "tool_use"}, {"template", "TOOLS"}},
                                                {{"name", "default"}, {"template", "{{ bos_token }}x{{ eos_token }}"}}})}};
  auto tmpl = ChatTemplate::from_tokenizer_config(write_config(config));
  ASSERT_NE(tmpl, nullptr);
  EXPECT_EQ(tmpl->render({.messages = json::array()}), "<B>x<E>");
}

TEST_F(ChatTemplateConfig, NoTemplateGivesNull) {
  EXPECT_EQ(ChatTemplate::from_tokenizer_config(write_config({{"bos_token", "<s>"}})), nullptr);
  EXPECT_EQ(ChatTemplate::from_tokenizer_config(
                write_config({{"chat_template", json::array({{{"name", "rag"}, {"template", "R"}}})}})),
            nullptr);
}

TEST_F(ChatTemplateConfig, SyntaxErrorNamesTheFile) {
  std::string path = write_config({{"chat_template", "ok\n{% if x %}"}});
  try {
    ChatTemplate::from_tokenizer_config(path);
    FAIL() << "expected a syntax error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ":2: Unexpected end of template", 0), 0u) << e.what();
  }
}

TEST_F(ChatTemplateConfig, ARequestsErrorDoesNotNameTheFile) {
  // The file's path is for the operator (start-up errors); a request's error goes to a client.
  std::string path = write_config({{"chat_template", "ok\n{{ missing.attr }}"}});
  auto tmpl = ChatTemplate::from_tokenizer_config(path);
  ASSERT_NE(tmpl, nullptr);
  try {
    tmpl->render({.messages = json::array()});
    FAIL() << "expected a render error";
  } catch (const InvalidRequest& e) {
    EXPECT_EQ(std::string(e.what()), "chat template:2: 'missing' is undefined");
  }
}

TEST_F(ChatTemplateConfig, MissingFileIsLoadError) {
  EXPECT_THROW(ChatTemplate::from_tokenizer_config("/nonexistent/tokenizer_config.json"), LoadError);
}

}  // namespace
}  // namespace pagoda::test
