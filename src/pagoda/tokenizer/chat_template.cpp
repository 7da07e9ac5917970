// ChatTemplate: loads a model's chat template from tokenizer_config.json and renders it with the
// variables transformers' apply_chat_template passes (messages, add_generation_prompt, bos/eos, tools...).
#include "pagoda/tokenizer/chat_template.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "pagoda/core/error.h"
#include "pagoda/tokenizer/jinja_evaluator.h"
#include "pagoda/tokenizer/jinja_parser.h"

namespace pagoda {

// What a request's error calls the template: its file's path is the server's business, not the client's.
constexpr const char* kRenderSource = "chat template";

struct ChatTemplate::Impl {
  jinja::Body body;
  std::string bos_token;
  std::string eos_token;
};

ChatTemplate::ChatTemplate(const std::string& template_text, std::string bos_token, std::string eos_token,
                           const std::string& source)
    : impl_(std::make_unique<Impl>()) {
  try {
    impl_->body = jinja::parse_template(template_text, source);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {  // a parser bug must still be an error naming the template
    throw Error(fmt::format("{}: cannot parse the template: {}", source, e.what()));
  }
  impl_->bos_token = std::move(bos_token);
  impl_->eos_token = std::move(eos_token);
}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::render(const ChatTemplateInputs& inputs) const {
  if (!inputs.messages.is_array()) throw InvalidRequest("chat messages must be a list");
  jinja::ValueDict globals;
  globals.set("bos_token", jinja::Value(impl_->bos_token));
  globals.set("eos_token", jinja::Value(impl_->eos_token));
  // transformers always passes tools and documents (None when absent), so "tools is defined" holds.
  globals.set("tools", jinja::Value(nullptr));
  globals.set("documents", jinja::Value(nullptr));
  if (inputs.extra.is_object()) {
    for (const auto& [k, v] : inputs.extra.items()) globals.set(k, jinja::Value::from_json(v));
  } else if (!inputs.extra.is_null()) {
    throw InvalidRequest("chat template variables must be an object");
  }
  globals.set("messages", jinja::Value::from_json(inputs.messages));
  globals.set("add_generation_prompt", jinja::Value(inputs.add_generation_prompt));
  try {
    return jinja::render(impl_->body, globals, kRenderSource);
  } catch (const Error&) {  // InvalidRequest included
    throw;
  } catch (const std::exception& e) {  // an evaluator bug fails this request, as a template error would
    throw InvalidRequest(fmt::format("{}: the template failed: {}", kRenderSource, e.what()));
  }
}

namespace {

// bos_token/eos_token are a plain string or a serialised AddedToken {"content": "...", ...}.
std::string token_string(const nlohmann::json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  return "";
}

}  // namespace

std::unique_ptr<ChatTemplate> ChatTemplate::from_tokenizer_config(const std::string& tokenizer_config_path) {
  std::ifstream in(tokenizer_config_path, std::ios::binary);
  if (!in) throw LoadError(tokenizer_config_path, "cannot open file");
  std::stringstream buffer;
  buffer << in.rdbuf();
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(buffer.str());
  } catch (const nlohmann::json::exception& e) {
    throw LoadError(tokenizer_config_path, std::string("invalid JSON: ") + e.what());
  }
  if (!config.is_object()) throw LoadError(tokenizer_config_path, "expected a JSON object");

  std::string text;
  std::string source = tokenizer_config_path;
  auto it = config.find("chat_template");
  if (it != config.end() && it->is_string()) {
    text = it->get<std::string>();
  } else if (it != config.end() && it->is_array()) {
    bool found = false;
    for (const auto& entry : *it) {
      if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
          entry["template"].is_string()) {
        text = entry["template"].get<std::string>();
        found = true;
      }
    }
    if (!found) return nullptr;
  } else if (it != config.end() && !it->is_null()) {
    throw LoadError(tokenizer_config_path, "chat_template must be a string or a list of named templates");
  } else {
    // Newer transformers versions save the template beside the config as chat_template.jinja.
    auto jinja_path = std::filesystem::path(tokenizer_config_path).parent_path() / "chat_template.jinja";
    std::ifstream jinja_in(jinja_path, std::ios::binary);
    if (!jinja_in) return nullptr;
    std::stringstream jinja_text;
    jinja_text << jinja_in.rdbuf();
    text = jinja_text.str();
    source = jinja_path.string();
  }
  return std::make_unique<ChatTemplate>(text, token_string(config, "bos_token"), token_string(config, "eos_token"),
                                        source);
}

std::unique_ptr<ChatTemplate> ChatTemplate::fallback() {
  // ChatML; list-of-parts content contributes its text parts.
  static const char* kTemplate =
      "{% for message in messages %}"
      "{{ '<|im_start|>' + message['role'] + '\\n' }}"
      "{% if message['content'] is string %}{{ message['content'] }}"
      "{% else %}{% for part in message['content'] %}"
      "{% if part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
      "{% endfor %}{% endif %}"
      "{{ '<|im_end|>\\n' }}"
      "{% endfor %}"
      "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
  return std::make_unique<ChatTemplate>(kTemplate, "", "", "fallback chat template");
}

}  // namespace pagoda
