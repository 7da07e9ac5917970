// Output constraints compiled for the served model's vocabulary: each distinct constraint once (a small
// most-recently-used cache, as clients repeat their schemas; bounded in entries and in bytes), against a
// vocabulary index built in the background from start-up (about a second for a 128k vocabulary; the first
// constrained request waits).
#pragma once

#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "pagoda/core/types.h"
#include "pagoda/server/openai_request.h"
#include "pagoda/structured/constraint.h"

namespace pagoda {
class Tokenizer;
}

namespace pagoda::server {

class ConstraintCompiler {
 public:
  // `tokenizer` may be null (then every constraint is a 400); `num_logits` is the model's logits width and
  // `end_ids` the tokens that end a generation.
  ConstraintCompiler(const Tokenizer* tokenizer, int num_logits, std::vector<TokenId> end_ids);

  // Null for an unconstrained request. Throws ApiError (400, naming the constraint's field) when the
  // constraint cannot be compiled.
  std::shared_ptr<const structured::CompiledConstraint> compile(const OutputConstraint& c) const;
  // Waits for the vocabulary index (it reads the tokenizer): call before the tokenizer is destroyed.
  void wait_for_index() const {
    if (vocab_.valid()) vocab_.wait();
  }

 private:
  static constexpr size_t kCacheSize = 64;
  // The cached constraints' grammars and keys together (about 16 MB each for a grammar near its 1 M-symbol limit:
  // 64 of them held 1.45 GB for good). A constraint larger than this alone is compiled for its request only.
  static constexpr size_t kCacheBytes = size_t{128} << 20;
  struct Entry {
    std::string key;
    std::shared_ptr<const structured::CompiledConstraint> compiled;
    size_t bytes;
  };
  const Tokenizer* tokenizer_;
  std::shared_future<std::shared_ptr<const structured::VocabIndex>> vocab_;
  mutable std::mutex mutex_;
  mutable std::list<Entry> cache_;  // newest first
  mutable size_t cache_bytes_ = 0;
};

}  // namespace pagoda::server
