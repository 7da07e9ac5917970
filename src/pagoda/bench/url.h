// The server a benchmark talks to: --base-url http://HOST[:PORT][/PREFIX]. Endpoints are appended to
// the prefix as given (http://h:8000 + /v1/completions), as vllm bench serve does.
#pragma once

#include <string>

namespace pagoda::bench {

struct BaseUrl {
  std::string host;    // name or address (IPv6 without brackets)
  std::string port;    // "80" when not given
  std::string prefix;  // "" or "/something", no trailing slash

  std::string target(const std::string& endpoint) const { return prefix + endpoint; }
  std::string to_string() const;
};

// Throws pagoda::InvalidRequest naming the problem (https, no host, a bad port).
BaseUrl parse_base_url(const std::string& url);

}  // namespace pagoda::bench
