// API key files and bearer-token lookup.
#include "pagoda/server/api_keys.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>

#include "pagoda/core/error.h"

namespace pagoda::server {
namespace {

Tenant tenant_from_json(const nlohmann::json& v, const std::string& where) {
  Tenant t;
  if (v.is_string()) {
    t.name = v.get<std::string>();
  } else if (v.is_object()) {
    if (!v.contains("tenant") || !v["tenant"].is_string()) throw Error(where + ": each key needs a \"tenant\" string");
    t.name = v["tenant"].get<std::string>();
    if (v.contains("max_concurrent_requests")) {
      if (!v["max_concurrent_requests"].is_number_integer() || v["max_concurrent_requests"].get<int>() < 0)
        throw Error(where + ": max_concurrent_requests must be a non-negative integer");
      t.max_concurrent_requests = v["max_concurrent_requests"].get<int>();
    }
    if (v.contains("max_requests_per_second")) {
      if (!v["max_requests_per_second"].is_number() || !(v["max_requests_per_second"].get<double>() >= 0))
        throw Error(where + ": max_requests_per_second must be a non-negative number");
      t.max_requests_per_second = v["max_requests_per_second"].get<double>();
    }
  } else {
    throw Error(where + ": a key maps to a tenant name or {\"tenant\", \"max_concurrent_requests\"}");
  }
  if (t.name.empty()) throw Error(where + ": empty tenant name");
  return t;
}

}  // namespace

void ApiKeys::add(const std::string& key, Tenant tenant) {
  if (key.empty()) throw Error("an API key cannot be empty");
  keys_[key] = std::move(tenant);
}

void ApiKeys::load_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') {
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) throw Error(path + ": not valid JSON");
    if (j.contains("keys") && j["keys"].is_array()) {
      for (const auto& e : j["keys"]) {
        if (!e.is_object() || !e.contains("key") || !e["key"].is_string()) throw Error(path + ": each entry needs a \"key\"");
        add(e["key"].get<std::string>(), tenant_from_json(e, path));
      }
    } else {
      for (const auto& [key, v] : j.items()) add(key, tenant_from_json(v, path));
    }
    return;
  }
  std::istringstream lines(text);
  std::string line;
  for (int n = 1; std::getline(lines, line); ++n) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream fields(line);
    std::string key, tenant, limit, rate;
    if (!(fields >> key)) continue;
    if (!(fields >> tenant))
      throw Error(fmt::format("{}:{}: expected KEY TENANT [MAX_CONCURRENT [MAX_PER_SECOND]]", path, n));
    Tenant t{tenant, 0};
    if (fields >> limit) {
      try {
        t.max_concurrent_requests = std::stoi(limit);
      } catch (const std::exception&) {
        throw Error(fmt::format("{}:{}: MAX_CONCURRENT must be an integer", path, n));
      }
      if (t.max_concurrent_requests < 0) throw Error(fmt::format("{}:{}: MAX_CONCURRENT must be >= 0", path, n));
    }
    if (fields >> rate) {
      try {
        t.max_requests_per_second = std::stod(rate);
      } catch (const std::exception&) {
        throw Error(fmt::format("{}:{}: MAX_PER_SECOND must be a number", path, n));
      }
      if (!(t.max_requests_per_second >= 0)) throw Error(fmt::format("{}:{}: MAX_PER_SECOND must be >= 0", path, n));
    }
    add(key, t);
  }
}

std::string Tenant::cache_salt(const std::string& request_salt) const {
  return (share_prefixes ? std::string("\x1eshared") : name) + '\x1f' + request_salt;
}

void ApiKeys::load_tenants_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot open");
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("tenants") || !j["tenants"].is_object())
    throw Error(path + ": expected {\"tenants\": {\"NAME\": {\"keys\": [...], ...}}}");
  static const char* const kFields[] = {"keys",     "weight",  "kv_share", "kv_cap", "max_concurrent_requests",
                                        "max_requests_per_second", "share_prefixes", "priority"};
  for (const auto& item : j["tenants"].items()) {
    // Named references, not a structured binding: the lambda below captures v (clang before 16 cannot).
    const std::string& name = item.key();
    const nlohmann::json& v = item.value();
    const std::string where = fmt::format("{}: tenant '{}'", path, name);
    if (name.empty()) throw Error(path + ": empty tenant name");
    if (!v.is_object()) throw Error(where + ": expected an object");
    for (const auto& [field, value] : v.items()) {
      if (std::find(std::begin(kFields), std::end(kFields), field) == std::end(kFields))
        throw Error(fmt::format("{}: unknown field \"{}\"", where, field));
    }
    const auto number = [&](const char* field, double fallback) {
      if (!v.contains(field)) return fallback;
      if (!v[field].is_number()) throw Error(fmt::format("{}: {} must be a number", where, field));
      return v[field].get<double>();
    };
    Tenant t;
    t.name = name;
    t.weight = static_cast<float>(number("weight", 1.0));
    t.kv_share = number("kv_share", 0);
    t.kv_cap = number("kv_cap", 0);
    const double concurrent = number("max_concurrent_requests", 0);
    if (!(concurrent >= 0) || concurrent != static_cast<int>(concurrent))
      throw Error(where + ": max_concurrent_requests must be a non-negative integer");
    t.max_concurrent_requests = static_cast<int>(concurrent);
    t.max_requests_per_second = number("max_requests_per_second", 0);
    if (!(t.max_requests_per_second >= 0)) throw Error(where + ": max_requests_per_second must be >= 0");
    const double priority = number("priority", 0);
    if (priority != static_cast<double>(static_cast<int>(std::clamp(priority, -1e6, 1e6))))
      throw Error(where + ": priority must be an integer in [-1000000, 1000000]");
    t.priority = static_cast<int>(priority);
    if (v.contains("share_prefixes")) {
      if (!v["share_prefixes"].is_boolean()) throw Error(where + ": share_prefixes must be true or false");
      t.share_prefixes = v["share_prefixes"].get<bool>();
    }
    validate(t.kv(), path);
    if (!v.contains("keys") || !v["keys"].is_array() || v["keys"].empty())
      throw Error(where + ": \"keys\" must be a non-empty array of strings");
    for (const auto& key : v["keys"]) {
      if (!key.is_string()) throw Error(where + ": \"keys\" must be a non-empty array of strings");
      if (keys_.contains(key.get<std::string>())) throw Error(where + ": a key is given twice");
      add(key.get<std::string>(), t);
    }
  }
}

const Tenant* ApiKeys::authenticate(const std::string& authorization) const {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.size() <= kBearer.size() || authorization.compare(0, kBearer.size(), kBearer) != 0) return nullptr;
  auto it = keys_.find(authorization.substr(kBearer.size()));
  return it == keys_.end() ? nullptr : &it->second;
}

}  // namespace pagoda::server
