// ConstraintCompiler (constraint_compiler.h).
#include "pagoda/server/constraint_compiler.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>

#include "pagoda/core/error.h"
#include "pagoda/server/api_error.h"
#include "pagoda/server/json_text.h"
#include "pagoda/structured/choice_grammar.h"
#include "pagoda/structured/json_schema_grammar.h"
#include "pagoda/structured/regex_grammar.h"
#include "pagoda/tokenizer/tokenizer.h"

namespace pagoda::server {
namespace {

std::string cache_key(const OutputConstraint& c) {
  std::string key = fmt::format("{}:{}", static_cast<int>(c.kind), c.spec);
  for (const std::string& choice : c.choices) key += fmt::format("\n{}:{}", choice.size(), choice);
  return key;
}

structured::Grammar grammar_of(const OutputConstraint& c) {
  switch (c.kind) {
    case OutputConstraint::Kind::kJsonObject:
      return structured::json_object_grammar();
    case OutputConstraint::Kind::kJsonSchema:
      return structured::json_schema_grammar(parse_ordered_json(c.spec, RequestLimits{}.max_json_depth));
    case OutputConstraint::Kind::kRegex:
      return structured::regex_grammar(c.spec);
    case OutputConstraint::Kind::kChoice:
      return structured::choice_grammar(c.choices);
    case OutputConstraint::Kind::kNone:
      break;
  }
  throw InvalidRequest("no output constraint");
}

const char* kind_name(OutputConstraint::Kind k) {
  switch (k) {
    case OutputConstraint::Kind::kJsonObject: return "json_object";
    case OutputConstraint::Kind::kJsonSchema: return "json_schema";
    case OutputConstraint::Kind::kRegex: return "regex";
    case OutputConstraint::Kind::kChoice: return "choice";
    case OutputConstraint::Kind::kNone: break;
  }
  return "none";
}

// What a compiled constraint's grammar and loop classes hold, roughly (the vectors' elements; the shared vocabulary
// index and the bounded mask cache not counted).
size_t approximate_bytes(const structured::CompiledConstraint& c) {
  const structured::Grammar& g = c.grammar;
  size_t bytes = g.symbols().size() * sizeof(structured::Symbol) + g.loop_sets().size() * sizeof(int32_t);
  for (const structured::CharSet& s : g.char_sets()) bytes += sizeof(s) + s.ranges().size() * sizeof(s.ranges()[0]);
  for (int r = 0; r < g.num_rules(); ++r)  // (64: a rule's own struct and its name's allocation, about)
    bytes += 64 + g.rule_name(r).size() + g.alternatives(r).size() * sizeof(int32_t);
  for (const auto& loop : c.loop_classes) bytes += sizeof(loop) + loop.relation.size();
  return bytes;
}

}  // namespace

ConstraintCompiler::ConstraintCompiler(const Tokenizer* tokenizer, int num_logits, std::vector<TokenId> end_ids)
    : tokenizer_(tokenizer) {
  if (tokenizer_ == nullptr) return;
  if (num_logits <= 0) num_logits = tokenizer_->vocab_size();
  vocab_ = std::async(std::launch::async, [tokenizer, num_logits, end_ids = std::move(end_ids)] {
             const auto start = std::chrono::steady_clock::now();
             auto index = structured::VocabIndex::from_tokenizer(*tokenizer, num_logits, end_ids);
             spdlog::debug("constrained decoding: vocabulary of {} tokens indexed in {:.2f} s", num_logits,
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
             return index;
           }).share();
}

std::shared_ptr<const structured::CompiledConstraint> ConstraintCompiler::compile(const OutputConstraint& c) const {
  if (c.kind == OutputConstraint::Kind::kNone) return nullptr;
  if (tokenizer_ == nullptr)
    throw ApiError(400, fmt::format("'{}' needs the model's tokenizer, and this model has none", c.field), c.field);
  const std::string key = cache_key(c);
  {
    std::lock_guard lock(mutex_);
    for (auto it = cache_.begin(); it != cache_.end(); ++it) {
      if (it->key != key) continue;
      cache_.splice(cache_.begin(), cache_, it);
      return cache_.front().compiled;
    }
  }
  std::shared_ptr<const structured::CompiledConstraint> compiled;
  try {
    compiled = structured::compile_constraint(grammar_of(c), vocab_.get(), kind_name(c.kind));
  } catch (const InvalidRequest& e) {
    throw ApiError(400, fmt::format("'{}': {}", c.field, e.what()), c.field);
  } catch (const JsonTooDeep& e) {  // a schema object as deep as --max-json-depth lets a body be (or a tool's, one
                                    // level deeper inside tool_choice "required"'s array) was a 500
    throw ApiError(400, fmt::format("'{}' must be a JSON schema nested at most {} levels deep", c.field, e.max_depth),
                   c.field);
  } catch (const nlohmann::json::exception& e) {
    throw ApiError(400, fmt::format("'{}': {}", c.field, e.what()), c.field);
  }
  const size_t bytes = key.size() + approximate_bytes(*compiled);
  if (bytes > kCacheBytes) return compiled;
  std::lock_guard lock(mutex_);
  cache_.push_front(Entry{key, compiled, bytes});
  cache_bytes_ += bytes;
  while (cache_.size() > kCacheSize || cache_bytes_ > kCacheBytes) {
    cache_bytes_ -= cache_.back().bytes;
    cache_.pop_back();
  }
  return compiled;
}

}  // namespace pagoda::server
