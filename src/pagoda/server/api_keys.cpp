// API key files and bearer-token lookup.
#include "pagoda/server/api_keys.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <iterator>
#include <sstream>

#include "pagoda/core/error.h"
#include "pagoda/core/number_text.h"
#include "pagoda/tokenizer/utf8.h"

namespace pagoda::server {
namespace {

// A tenant name becomes a Prometheus label value and goes into logs: valid UTF-8 without control characters.
void check_tenant_name(const std::string& name, const std::string& where) {
  if (name.empty()) throw Error(where + ": empty tenant name");
  const bool control = std::any_of(name.begin(), name.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
  if (control || !utf8::is_valid(name)) throw Error(where + ": a tenant name must be UTF-8 text without control characters");
  if (name == kOtherTenantsLabel)
    throw Error(fmt::format("{}: the tenant name '{}' is reserved (the metrics' label for tenants past the {}th)", where,
                            name, kMaxTenantLabels));
}

Tenant tenant_from_json(const nlohmann::json& v, const std::string& where) {
  Tenant t;
  if (v.is_string()) {
    t.name = v.get<std::string>();
  } else if (v.is_object()) {
    for (const auto& [field, value] : v.items())
      if (field != "key" && field != "tenant" && field != "max_concurrent_requests" && field != "max_requests_per_second")
        throw Error(fmt::format("{}: unknown field \"{}\"", where, field));
    if (!v.contains("tenant") || !v["tenant"].is_string()) throw Error(where + ": each key needs a \"tenant\" string");
    t.name = v["tenant"].get<std::string>();
    if (v.contains("max_concurrent_requests")) {
      const nlohmann::json& m = v["max_concurrent_requests"];
      if (!m.is_number_integer() || m.get<int64_t>() < 0 || m.get<int64_t>() > std::numeric_limits<int32_t>::max())
        throw Error(where + ": max_concurrent_requests must be a non-negative integer");
      t.max_concurrent_requests = static_cast<int>(m.get<int64_t>());
    }
    if (v.contains("max_requests_per_second")) {
      if (!v["max_requests_per_second"].is_number() || !(v["max_requests_per_second"].get<double>() >= 0))
        throw Error(where + ": max_requests_per_second must be a non-negative number");
      t.max_requests_per_second = v["max_requests_per_second"].get<double>();
    }
  } else {
    throw Error(where + ": a key maps to a tenant name or {\"tenant\", \"max_concurrent_requests\"}");
  }
  check_tenant_name(t.name, where);
  return t;
}

}  // namespace

void ApiKeys::add(const std::string& key, Tenant tenant, const std::string& source) {
  if (key.empty()) throw Error(source + ": an API key cannot be empty");
  // A client sends the key in a header, which cannot carry these: such a key could never authenticate.
  if (std::any_of(key.begin(), key.end(), [](char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f; }))
    throw Error(source + ": an API key cannot contain spaces or control characters");
  if (keys_.contains(key)) throw Error(source + ": an API key is given twice (tenant '" + keys_[key].name + "' and '" + tenant.name + "')");
  // A tenant is described in one place: its limits would otherwise differ by the key a client uses.
  const auto [it, fresh] = tenant_sources_.try_emplace(tenant.name, source);
  if (!fresh && it->second != source)
    throw Error(fmt::format("tenant '{}' is given in both {} and {}", tenant.name, it->second, source));
  keys_[key] = std::move(tenant);
}

void ApiKeys::load_file(const std::string& path) {
  const size_t before = keys_.size();
  read_keys_file(path);
  // An empty file (or a directory, /dev/null) would leave the server open to anyone: refuse it.
  if (keys_.size() == before) throw Error(path + ": holds no API keys (authentication would be off)");
}

void ApiKeys::read_keys_file(const std::string& path) {
  if (std::filesystem::is_directory(path)) throw Error(path + ": is a directory");
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  // A UTF-8 byte order mark (some editors save one) is not part of the first key: a JSON file read as text gave
  // the key `\ufeff{"sk-alice":`.
  if (text.starts_with("\xEF\xBB\xBF")) text.erase(0, 3);
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') {
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) throw Error(path + ": not valid JSON");
    if (j.contains("keys") && j["keys"].is_array()) {
      for (const auto& e : j["keys"]) {
        if (!e.is_object() || !e.contains("key") || !e["key"].is_string()) throw Error(path + ": each entry needs a \"key\"");
        add(e["key"].get<std::string>(), tenant_from_json(e, path), path);
      }
    } else {
      for (const auto& [key, v] : j.items()) add(key, tenant_from_json(v, path), path);
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
    check_tenant_name(tenant, fmt::format("{}:{}", path, n));
    // Whole fields only ("4abc" was read as 4), and any finite number (1e-320 was refused: stod's out_of_range).
    if (fields >> limit) {
      const std::optional<int> v = parse_integer<int>(limit);
      if (!v) throw Error(fmt::format("{}:{}: MAX_CONCURRENT must be an integer", path, n));
      if (*v < 0) throw Error(fmt::format("{}:{}: MAX_CONCURRENT must be >= 0", path, n));
      t.max_concurrent_requests = *v;
    }
    if (fields >> rate) {
      const std::optional<double> v = parse_number(rate);
      if (!v) throw Error(fmt::format("{}:{}: MAX_PER_SECOND must be a number", path, n));
      if (*v < 0) throw Error(fmt::format("{}:{}: MAX_PER_SECOND must be >= 0", path, n));
      t.max_requests_per_second = *v;
    }
    if (fields >> rate) throw Error(fmt::format("{}:{}: expected KEY TENANT [MAX_CONCURRENT [MAX_PER_SECOND]]", path, n));
    add(key, t, path);
  }
}

std::string Tenant::cache_salt(const std::string& request_salt) const {
  return (share_prefixes ? std::string("\x1eshared") : name) + '\x1f' + request_salt;
}

void ApiKeys::load_tenants_file(const std::string& path) {
  if (std::filesystem::is_directory(path)) throw Error(path + ": is a directory");
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot open");
  // A tenant named twice would silently lose its first entry (JSON keeps the last): refused while parsing.
  std::set<std::string> names;
  std::string duplicate;
  const nlohmann::json::parser_callback_t watch = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    if (event == nlohmann::json::parse_event_t::key && depth == 2 && parsed.is_string() &&
        !names.insert(parsed.get<std::string>()).second && duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  const nlohmann::json j = nlohmann::json::parse(in, watch, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("tenants") || !j["tenants"].is_object())
    throw Error(path + ": expected {\"tenants\": {\"NAME\": {\"keys\": [...], ...}}}");
  if (!duplicate.empty()) throw Error(fmt::format("{}: tenant '{}' is given twice", path, duplicate));
  for (const auto& [field, value] : j.items())  // a misspelt section ("tenant") was ignored without a word
    if (field != "tenants")
      throw Error(fmt::format("{}: unknown field \"{}\" (the file holds \"tenants\")", path, field));
  if (j["tenants"].empty()) throw Error(path + ": holds no tenants (authentication would be off)");
  static const char* const kFields[] = {"keys",     "weight",  "kv_share", "kv_cap", "max_concurrent_requests",
                                        "max_requests_per_second", "share_prefixes", "priority",
                                        "prompt_tokens_per_step"};
  double shares = 0;  // the tenants' guaranteed fractions of the pool together
  for (const auto& item : j["tenants"].items()) {
    // Named references, not a structured binding: the lambda below captures v (clang before 16 cannot).
    const std::string& name = item.key();
    const nlohmann::json& v = item.value();
    const std::string where = fmt::format("{}: tenant '{}'", path, name);
    check_tenant_name(name, path);
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
    const double prompt_tokens = number("prompt_tokens_per_step", 0);
    if (!(prompt_tokens >= 0 && prompt_tokens <= 1e9) || prompt_tokens != static_cast<int>(prompt_tokens))
      throw Error(where + ": prompt_tokens_per_step must be a non-negative integer");
    t.prompt_tokens_per_step = static_cast<int>(prompt_tokens);
    if (v.contains("share_prefixes")) {
      if (!v["share_prefixes"].is_boolean()) throw Error(where + ": share_prefixes must be true or false");
      t.share_prefixes = v["share_prefixes"].get<bool>();
    }
    validate(t.kv(), path);
    if (t.kv_share > 0 && t.kv_share <= 1) shares += t.kv_share;
    if (!v.contains("keys") || !v["keys"].is_array() || v["keys"].empty())
      throw Error(where + ": \"keys\" must be a non-empty array of strings");
    for (const auto& key : v["keys"]) {
      if (!key.is_string()) throw Error(where + ": \"keys\" must be a non-empty array of strings");
      if (keys_.contains(key.get<std::string>())) throw Error(where + ": a key is given twice");
      add(key.get<std::string>(), t, path);
    }
  }
  // Shares that add up to more than the pool guarantee nothing to anyone (0.9 and 0.9 started).
  if (shares > 1 + 1e-9)
    throw Error(
        fmt::format("{}: the tenants' kv_share fractions add up to {:.3g}, more than the whole pool", path, shares));
}

std::vector<Tenant> ApiKeys::tenants() const {
  std::map<std::string, Tenant> by_name;  // sorted: the same order on every start
  for (const auto& [key, tenant] : keys_) by_name.emplace(tenant.name, tenant);
  std::vector<Tenant> out;
  for (auto& [name, tenant] : by_name) out.push_back(std::move(tenant));
  return out;
}

const Tenant* ApiKeys::authenticate(const std::string& authorization) const {
  constexpr std::string_view kBearer = "bearer ";  // the scheme is case-insensitive (RFC 9110 11.1)
  if (authorization.size() <= kBearer.size() ||
      !std::equal(kBearer.begin(), kBearer.end(), authorization.begin(),
                  [](char a, char b) { return a == std::tolower(static_cast<unsigned char>(b)); }))
    return nullptr;
  auto it = keys_.find(authorization.substr(kBearer.size()));
  return it == keys_.end() ? nullptr : &it->second;
}

}  // namespace pagoda::server
