// The token pool and exact-length text.
#include "pagoda/bench/prompt_text.h"

#include <algorithm>
#include <cstdlib>

#include "pagoda/core/error.h"

namespace pagoda::bench {
namespace {

// Plain prose with common words, digits and punctuation (written for this purpose).
constexpr const char* kPoolText =
    "The morning train left the station at seven, and most of the passengers were still half asleep. "
    "A woman by the window counted the bridges over the river: one, two, three, four, five. "
    "Her brother had promised to meet her in the old market square, near the fountain with the bronze fish, "
    "but he was often late and rarely sorry about it. Outside, farms gave way to small towns, then to "
    "warehouses, cranes and long grey walls covered in bright paint. She opened a notebook and wrote a list "
    "of questions she wanted to ask him about the house, the garden, the letters, and the money. "
    "When the train finally stopped, the platform was crowded with children, dogs, bicycles and people "
    "selling coffee, bread, apples and newspapers for 2 or 3 coins each. Nobody seemed to be in a hurry.";

}  // namespace

std::vector<TokenId> token_pool(PromptTokenizer& tokenizer) {
  std::vector<TokenId> ids = tokenizer.encode(kPoolText);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  if (ids.empty()) throw Error("the server tokenized the prompt text to no tokens");
  return ids;
}

std::string exact_text(PromptTokenizer& tokenizer, std::vector<TokenId> ids, const std::vector<TokenId>& pool,
                       std::mt19937_64& rng, int* num_tokens) {
  const size_t target = ids.size();
  std::uniform_int_distribution<size_t> pick(0, pool.size() - 1);
  std::string best;
  size_t best_count = 0;
  bool have_best = false;
  for (int round = 0; round < 16; ++round) {
    std::string text = tokenizer.decode(ids);
    const size_t n = tokenizer.count(text);
    const auto distance = [&](size_t k) { return k > target ? k - target : target - k; };
    if (!have_best || distance(n) < distance(best_count)) {
      best = text;
      best_count = n;
      have_best = true;
    }
    if (n == target) break;
    std::vector<TokenId> content = tokenizer.encode(text);
    if (n > target) {
      content.resize(content.size() > n - target ? content.size() - (n - target) : 1);
    } else {
      for (size_t k = n; k < target; ++k) content.push_back(pool[pick(rng)]);
    }
    ids = std::move(content);
  }
  if (num_tokens) *num_tokens = static_cast<int>(best_count);
  return best;
}

}  // namespace pagoda::bench
