// The real Llama-3.1 chat template (tests/data/models/llama-3.1-8b/chat_template.jinja) rendering a chat with
// tools, a tool-call turn sent back with content null and its arguments as a JSON string, and a tool result,
// through the same request parsing the server uses; compared with Python jinja2 in transformers' environment
// (chat_tools_reference.json, made by make_chat_tools_reference.py beside it).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "pagoda/server/openai_request.h"
#include "pagoda/server/tool_request.h"
#include "pagoda/tokenizer/chat_template.h"

namespace pagoda::server {
namespace {

using json = nlohmann::ordered_json;

std::string read(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const std::string kDir = std::string(PAGODA_TEST_DATA_DIR) + "/models/llama-3.1-8b/";

TEST(ToolChatTemplate, Llama31RendersToolsCallsAndResultsAsTransformersDoes) {
  const json reference = json::parse(read(kDir + "chat_tools_reference.json"));
  const ChatTemplate tmpl(read(kDir + "chat_template.jinja"), "<|begin_of_text|>", "<|eot_id|>", "chat_template.jinja");
  const ParsedRequest r = parse_chat_request(reference["request"].dump());
  const json tools = template_tools(r.tools, ToolServingOptions{true, "llama3_json", false});
  EXPECT_EQ(tmpl.render(ChatTemplateInputs{r.messages, true, json{{"tools", tools}}}), reference["rendered"].get<std::string>());

  // Without tools the template writes no tool instructions.
  json first_two = reference["request"]["messages"];
  first_two.erase(first_two.begin() + 2, first_two.end());
  const ParsedRequest chat = parse_chat_request(json{{"messages", first_two}}.dump());
  EXPECT_TRUE(template_tools(chat.tools, {}).is_null());
  EXPECT_EQ(tmpl.render(ChatTemplateInputs{chat.messages, true, json::object()}),
            reference["rendered_without_tools"].get<std::string>());
}

}  // namespace
}  // namespace pagoda::server
