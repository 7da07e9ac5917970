// Shared helpers for the golden-output tests: reading reference files and running a model on the CPU.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "pagoda/backend/cpu/cpu_ops.h"
#include "pagoda/engine/request.h"
#include "pagoda/loader/model_loader.h"
#include "pagoda/model/llama_model.h"
#include "pagoda/runner/batch_builder.h"

namespace pagoda::testing {

// PAGODA_TEST_DATA_DIR from the environment (the GPU tests run from a bundle on another machine), else
// the source tree's tests/data.
inline std::string data_path(const std::string& relative) {
  const char* env = std::getenv("PAGODA_TEST_DATA_DIR");
  return std::string(env && *env ? env : PAGODA_TEST_DATA_DIR) + "/" + relative;
}
inline std::string bundled_model_path() { return data_path("../../models/stories260K.gguf"); }

inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// Runs `ids` through the model in chunks of `chunk` tokens and returns the logits of every position,
// [ids.size() * vocab]. Chunking exercises attention over KV written by earlier steps.
inline std::vector<float> all_position_logits(const ModelConfig& config, const ModelWeights& weights,
                                              const std::vector<TokenId>& ids, int chunk,
                                              DType kv_dtype = DType::kF32) {
  CpuOps ops;
  LlamaModel model(config, weights);
  const int block_size = 16;
  const int num_blocks = static_cast<int>(ids.size()) / block_size + 1;
  KvCache cache = ops.allocate_kv_cache(model.kv_cache_spec(num_blocks, block_size, kv_dtype));
  std::vector<int32_t> blocks(static_cast<size_t>(num_blocks));
  for (int i = 0; i < num_blocks; ++i) blocks[i] = num_blocks - 1 - i;  // deliberately not in order
  const int64_t vocab = config.vocab_size;
  std::vector<float> out(ids.size() * static_cast<size_t>(vocab));
  BatchBuilder builder;
  for (size_t start = 0; start < ids.size(); start += static_cast<size_t>(chunk)) {
    const size_t n = std::min(ids.size() - start, static_cast<size_t>(chunk));
    SequenceChunk c{std::span(ids).subspan(start, n), static_cast<int>(start), blocks, LogitsWanted::kAll};
    const ForwardBatch& batch = builder.build(std::span(&c, 1), block_size);
    Tensor logits = model.forward(ops, batch, cache);
    ops.download_f32(Tensor(out.data() + start * vocab, DType::kF32, {static_cast<int64_t>(n), vocab}), logits);
  }
  return out;
}
inline std::vector<float> all_position_logits(const LoadedModel& loaded, const std::vector<TokenId>& ids,
                                              int chunk, DType kv_dtype = DType::kF32) {
  return all_position_logits(loaded.config, loaded.weights, ids, chunk, kv_dtype);
}

// A greedy request that ignores EOS: its output length is max_tokens, whatever the model says.
inline GenerateRequest greedy_request(std::vector<TokenId> prompt, int max_tokens) {
  GenerateRequest r;
  r.prompt_ids = std::move(prompt);
  r.params.temperature = 0.0;
  r.params.ignore_eos = true;
  r.params.max_tokens = max_tokens;
  return r;
}

// One position's logits `row` [vocab] against a transformers reference generation (refs/hf_*.json,
// refs/quant_refs_part1.json): its top-8 ids and logits, and the logsumexp, within `tolerance`. Ids must
// match except where the reference itself has a tie within tolerance. Returns the largest difference of
// the top-8 logits.
inline double expect_matches_reference_top8(const float* row, int64_t vocab, const nlohmann::json& gen, size_t p,
                                            double tolerance) {
  std::vector<int> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + 8, order.end(),
                    [&](int a, int b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
  const auto top8 = gen["top8_ids"][p].get<std::vector<int>>();
  const auto top8_logits = gen["top8_logits"][p].get<std::vector<float>>();
  double max_diff = 0;
  for (int i = 0; i < 8; ++i) {
    max_diff = std::max(max_diff, std::abs(static_cast<double>(row[top8[i]]) - top8_logits[i]));
    EXPECT_NEAR(row[top8[i]], top8_logits[i], tolerance) << "position " << p << " rank " << i;
    if (order[i] != top8[i]) {
      EXPECT_NEAR(row[order[i]], top8_logits[i], tolerance) << "position " << p << " rank " << i;
    }
  }
  double mx = *std::max_element(row, row + vocab), sum = 0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - mx);
  EXPECT_NEAR(mx + std::log(sum), gen["logsumexp"][p].get<double>(), tolerance) << "position " << p;
  return max_diff;
}

}  // namespace pagoda::testing
