// ApiError: a request the server answers with an OpenAI-shaped error object and an HTTP status.
#pragma once

#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>

namespace pagoda::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string param = "", std::string type = "")
      : std::runtime_error(message), status_(status), message_(std::move(message)), param_(std::move(param)),
        type_(std::move(type)) {}
  // The whole message (what() stops at a NUL byte, which a client's own text may hold).
  const std::string& message() const { return message_; }
  int status() const { return status_; }
  const std::string& param() const { return param_; }
  // 429 and 503: the Retry-After header, in whole seconds.
  int retry_after_seconds() const { return retry_after_s_; }
  ApiError& retry_after(int seconds) {
    retry_after_s_ = seconds;
    return *this;
  }
  // 405: the methods the path takes, for the Allow header.
  const std::string& allow() const { return allow_; }
  ApiError& allow(std::string methods) {
    allow_ = std::move(methods);
    return *this;
  }
  // OpenAI's error types: invalid_request_error (400, 404, 413), authentication_error (401),
  // rate_limit_error (429), server_error (5xx).
  std::string type() const {
    if (!type_.empty()) return type_;
    if (status_ == 401) return "authentication_error";
    if (status_ == 429) return "rate_limit_error";
    if (status_ >= 500) return "server_error";
    return "invalid_request_error";
  }
  nlohmann::json to_json() const {
    return {{"error",
             {{"message", message_}, {"type", type()}, {"param", param_.empty() ? nlohmann::json(nullptr) : nlohmann::json(param_)},
              {"code", status_}}}};
  }

 private:
  int status_;
  std::string message_, param_, type_, allow_;
  int retry_after_s_ = 1;
};

// JSON text for responses: never throws on invalid UTF-8 (bytes are replaced with U+FFFD).
inline std::string dump_json(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

}  // namespace pagoda::server
