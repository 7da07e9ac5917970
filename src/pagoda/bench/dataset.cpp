// Synthetic and file datasets.
#include "pagoda/bench/dataset.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <random>

#include "pagoda/core/error.h"
#include "pagoda/core/text_file.h"

namespace pagoda::bench {

int draw_length(std::mt19937_64& rng, int len, double ratio) {
  const int lo = std::max(1, static_cast<int>(std::floor(len * (1 - ratio))));
  const int hi = std::max(lo, static_cast<int>(std::ceil(len * (1 + ratio))));
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

std::vector<TokenId> random_ids(std::mt19937_64& rng, const std::vector<TokenId>& pool, int n) {
  std::uniform_int_distribution<size_t> pick(0, pool.size() - 1);
  std::vector<TokenId> ids(static_cast<size_t>(n));
  for (TokenId& t : ids) t = pool[pick(rng)];
  return ids;
}

std::vector<BenchPrompt> synthetic_prompts(const SyntheticOptions& o, const std::vector<TokenId>& pool) {
  if (o.num_prompts < 1) throw InvalidRequest("--num-prompts must be at least 1");
  if (o.input_len < 1) throw InvalidRequest("--random-input-len must be at least 1");
  if (o.output_len < 1) throw InvalidRequest("--random-output-len must be at least 1");
  if (!(o.range_ratio >= 0 && o.range_ratio < 1)) throw InvalidRequest("--random-range-ratio must be in [0, 1)");
  if (o.prefix_len < 0) throw InvalidRequest("--prefix-len must not be negative");
  if (o.prefix_len > 0 && o.num_prefix_groups < 1) throw InvalidRequest("--num-prefix-groups must be at least 1");
  if (pool.empty()) throw InvalidRequest("no tokens to build prompts from");
  std::mt19937_64 rng(o.seed);
  const auto draw_ids = [&](int n) { return random_ids(rng, pool, n); };
  std::vector<std::vector<TokenId>> prefixes;
  if (o.prefix_len > 0)
    for (int g = 0; g < o.num_prefix_groups; ++g) prefixes.push_back(draw_ids(o.prefix_len));
  std::vector<BenchPrompt> prompts;
  prompts.reserve(static_cast<size_t>(o.num_prompts));
  for (int i = 0; i < o.num_prompts; ++i) {
    BenchPrompt p;
    if (!prefixes.empty()) {
      p.group = i % o.num_prefix_groups;
      p.ids = prefixes[static_cast<size_t>(p.group)];
    }
    const std::vector<TokenId> tail = draw_ids(draw_length(rng, o.input_len, o.range_ratio));
    p.ids.insert(p.ids.end(), tail.begin(), tail.end());
    p.prompt_len = static_cast<int>(p.ids.size());
    p.output_len = draw_length(rng, o.output_len, o.range_ratio);
    prompts.push_back(std::move(p));
  }
  if (!prefixes.empty()) std::shuffle(prompts.begin(), prompts.end(), rng);  // groups interleave at random
  return prompts;
}

std::vector<BenchPrompt> jsonl_prompts(const std::string& path, int num_prompts, int default_output_len) {
  if (num_prompts < 1) throw InvalidRequest("--num-prompts must be at least 1");
  std::ifstream in = open_text_file(path, "the dataset");
  std::vector<BenchPrompt> lines;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto bad = [&](const std::string& why) { return InvalidRequest(fmt::format("{}:{}: {}", path, line_no, why)); };
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) throw bad("expected a JSON object like {\"prompt\": \"...\", \"output_len\": 128}");
    if (!j.contains("prompt")) throw bad("no \"prompt\"");
    BenchPrompt p;
    const nlohmann::json& prompt = j["prompt"];
    if (prompt.is_string()) {
      p.text = prompt.get<std::string>();
      p.is_text = true;
      if (p.text.empty()) throw bad("the prompt is empty");
    } else if (prompt.is_array() && !prompt.empty()) {
      for (const auto& t : prompt) {
        if (!t.is_number_integer() || t.get<int64_t>() < 0) throw bad("\"prompt\" ids must be non-negative integers");
        p.ids.push_back(t.get<TokenId>());
      }
      p.prompt_len = static_cast<int>(p.ids.size());
    } else {
      throw bad("\"prompt\" must be a string or a non-empty list of token ids");
    }
    p.output_len = default_output_len;
    for (const char* key : {"output_len", "output_tokens"}) {
      if (!j.contains(key)) continue;
      if (!j[key].is_number_integer() || j[key].get<int64_t>() < 1) throw bad(fmt::format("\"{}\" must be a positive integer", key));
      p.output_len = j[key].get<int>();
    }
    lines.push_back(std::move(p));
  }
  if (lines.empty()) throw InvalidRequest(path + ": no prompts in the dataset");
  std::vector<BenchPrompt> prompts;
  for (int i = 0; i < num_prompts; ++i) prompts.push_back(lines[static_cast<size_t>(i) % lines.size()]);
  return prompts;
}

}  // namespace pagoda::bench
