// Base URL parsing.
#include "pagoda/bench/url.h"

#include <algorithm>
#include <cctype>

#include "pagoda/core/error.h"

namespace pagoda::bench {

std::string BaseUrl::to_string() const {
  const bool v6 = host.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + host + "]" : host) + ":" + port + prefix;
}

BaseUrl parse_base_url(const std::string& url) {
  const auto bad = [&](const std::string& why) { return InvalidRequest("--base-url " + url + ": " + why); };
  std::string rest = url;
  if (rest.rfind("https://", 0) == 0) throw bad("https is not supported; use http://");
  if (rest.rfind("http://", 0) == 0) rest = rest.substr(7);
  else if (rest.find("://") != std::string::npos) throw bad("only http:// URLs are supported");
  BaseUrl u;
  const size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  if (slash != std::string::npos) u.prefix = rest.substr(slash);
  while (!u.prefix.empty() && u.prefix.back() == '/') u.prefix.pop_back();
  if (!authority.empty() && authority.front() == '[') {  // [v6]:port
    const size_t close = authority.find(']');
    if (close == std::string::npos) throw bad("unclosed '[' in the host");
    u.host = authority.substr(1, close - 1);
    authority = authority.substr(close + 1);
    if (!authority.empty() && authority.front() != ':') throw bad("expected ':' after ']'");
    if (!authority.empty()) u.port = authority.substr(1);
  } else {
    const size_t colon = authority.rfind(':');
    u.host = authority.substr(0, colon);
    if (colon != std::string::npos) u.port = authority.substr(colon + 1);
  }
  if (u.host.empty()) throw bad("no host");
  if (u.port.empty()) u.port = "80";
  if (!std::all_of(u.port.begin(), u.port.end(), [](unsigned char c) { return std::isdigit(c); }) || u.port.size() > 5 ||
      std::stoi(u.port) == 0 || std::stoi(u.port) > 65535)
    throw bad("the port must be a number from 1 to 65535");
  return u;
}

}  // namespace pagoda::bench
