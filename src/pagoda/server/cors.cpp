// CORS (cors.h).
#include "pagoda/server/cors.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>

#include "pagoda/core/error.h"

namespace pagoda::server {

namespace {

bool contains(const std::vector<std::string>& list, std::string_view item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string_view::npos ? std::string() : std::string(s.substr(b, e - b + 1));
}

// "a, b,c" -> {"a", "b", "c"}; empty items dropped.
std::vector<std::string> split_commas(std::string_view v) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= v.size()) {
    const size_t comma = v.find(',', start);
    const std::string item = trim(v.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (!item.empty()) out.push_back(item);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// What a response to an allowed origin says about it: "*" when any origin may read it without credentials,
// else the origin itself (and Vary: Origin, since the answer depends on it).
void add_origin(const CorsPolicy& policy, std::string_view origin,
                std::vector<std::pair<std::string, std::string>>& headers) {
  if (contains(policy.origins, "*") && !policy.credentials) {
    headers.emplace_back("Access-Control-Allow-Origin", "*");
  } else {
    headers.emplace_back("Access-Control-Allow-Origin", std::string(origin));
    headers.emplace_back("Vary", "Origin");
  }
  if (policy.credentials) headers.emplace_back("Access-Control-Allow-Credentials", "true");
}

}  // namespace

bool CorsPolicy::allows_origin(std::string_view origin) const {
  return !origin.empty() && (contains(origins, "*") || contains(origins, origin));
}

std::vector<std::string> parse_cors_list(const std::string& flag, const std::string& value) {
  std::vector<std::string> out;
  const std::string v = trim(value);
  if (!v.empty() && v.front() == '[') {
    const nlohmann::json j = nlohmann::json::parse(v, nullptr, false);
    if (!j.is_array()) throw Error(fmt::format("{}: '{}' is not a JSON list of strings", flag, value));
    for (const auto& item : j) {
      if (!item.is_string()) throw Error(fmt::format("{}: '{}' is not a JSON list of strings", flag, value));
      out.push_back(item.get<std::string>());
    }
  } else {
    out = split_commas(v);
  }
  if (out.empty()) throw Error(fmt::format("{}: give at least one value (\"*\" for any)", flag));
  return out;
}

bool is_cors_preflight(const HttpRequest& request) {
  return request.method == "OPTIONS" && !request.header("origin").empty() &&
         !request.header("access-control-request-method").empty();
}

HttpResponse cors_preflight_response(const CorsPolicy& policy, const HttpRequest& request) {
  const std::string origin = request.header("origin");
  const std::string method = request.header("access-control-request-method");
  std::vector<std::string> failures;
  if (!policy.allows_origin(origin)) failures.push_back("origin");
  if (!contains(policy.methods, "*") && !contains(policy.methods, method)) failures.push_back("method");
  std::vector<std::string> requested;
  for (const std::string& h : split_commas(request.header("access-control-request-headers")))
    requested.push_back(lower(h));
  if (!contains(policy.headers, "*")) {
    std::vector<std::string> allowed;
    for (const std::string& h : policy.headers) allowed.push_back(lower(h));
    for (const std::string& h : requested) {
      // Headers a browser may always send (the CORS-safelisted ones) need no permission.
      const bool safelisted = h == "accept" || h == "accept-language" || h == "content-language" || h == "content-type";
      if (!safelisted && !contains(allowed, h)) {
        failures.push_back("headers");
        break;
      }
    }
  }
  HttpResponse r;
  r.content_type = "text/plain; charset=utf-8";
  if (!failures.empty()) {
    r.status = 400;
    r.body = "Disallowed CORS " + join(failures);
    return r;
  }
  r.status = 200;
  r.body = "OK";
  add_origin(policy, origin, r.headers);
  r.headers.emplace_back("Access-Control-Allow-Methods",
                         contains(policy.methods, "*") ? "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT" : join(policy.methods));
  if (contains(policy.headers, "*")) {
    if (!requested.empty()) r.headers.emplace_back("Access-Control-Allow-Headers", request.header("access-control-request-headers"));
  } else {
    r.headers.emplace_back("Access-Control-Allow-Headers", join(policy.headers));
  }
  r.headers.emplace_back("Access-Control-Max-Age", "600");
  return r;
}

std::vector<std::pair<std::string, std::string>> cors_response_headers(const CorsPolicy& policy, const HttpRequest& request) {
  std::vector<std::pair<std::string, std::string>> headers;
  const std::string origin = request.header("origin");
  if (policy.allows_origin(origin)) add_origin(policy, origin, headers);
  return headers;
}

}  // namespace pagoda::server
