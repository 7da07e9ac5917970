// ChatTemplate: renders a model's chat_template (a Jinja2 template from tokenizer_config.json) for a
// list of messages, as transformers' apply_chat_template does. Implements the Jinja subset that real
// chat templates use (Llama-3, Llama-2/Mistral, ChatML/Qwen, ...); a model without a template uses a
// documented default (ChatML-like).
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>

namespace pagoda {

// Ordered JSON: objects keep their keys in the order given, so `tojson` in a template writes them as
// transformers would write the Python dicts of the same request.
struct ChatTemplateInputs {
  nlohmann::ordered_json messages;  // [{"role": "...", "content": "..."}, ...] (content may be a list of parts)
  bool add_generation_prompt = true;
  nlohmann::ordered_json extra{};  // other variables the template may read (e.g. "tools", "date_string")
};

class ChatTemplate {
 public:
  // Parses the template once. Throws pagoda::Error naming `source` and the line for a syntax error.
  ChatTemplate(const std::string& template_text, std::string bos_token, std::string eos_token,
               const std::string& source = "chat_template");
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // Throws pagoda::InvalidRequest for template errors raised while rendering (raise_exception(...),
  // bad message shapes), with the template's message.
  std::string render(const ChatTemplateInputs& inputs) const;

  // The template of a tokenizer_config.json ("chat_template" as a string, or the "default" entry of a
  // list of named templates), with its bos/eos token strings; nullptr when the file has none.
  static std::unique_ptr<ChatTemplate> from_tokenizer_config(const std::string& tokenizer_config_path);
  // The fallback for models without a template: "<|im_start|>{role}\n{content}<|im_end|>\n" per message,
  // then "<|im_start|>assistant\n" when add_generation_prompt.
  static std::unique_ptr<ChatTemplate> fallback();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagoda
