// Fuzz target: output constraints from requests (JSON schemas, regular expressions) compiled to grammars,
// then run: a mask and a few tokens over a vocabulary of single characters, so the pushdown stacks and the
// trie walk see the grammars hostile input builds. The first byte picks the kind; anything but a clean
// InvalidRequest (or a JSON parse error) is a finding. The stack search runs under a 200th of the server's
// ExpansionLimits: the budget bounds each mask by design (unit tests check it), and a walk of 16 masks at the
// server's limits may take 20 minutes under ASan (about 2 us a frame), which libFuzzer would report as a
// timeout again and again; here a walk's 16 masks, 16 tokens and its start cost at most about 7 s (34 budgets).
// Work the budget does not bound (parsing, compiling, the trie walk) is what stays to find.
#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "pagoda/core/error.h"
#include "pagoda/structured/constraint.h"
#include "pagoda/structured/json_schema_grammar.h"
#include "pagoda/structured/regex_grammar.h"

namespace {

std::shared_ptr<const pagoda::structured::VocabIndex> vocab() {
  static const auto v = [] {
    std::vector<std::string> tokens;
    for (int c = 0x20; c < 0x7F; ++c) tokens.emplace_back(1, static_cast<char>(c));
    for (const char* t : {"\n", "\xC3", "\xA9", "\xE2\x98", "\"a\"", "12"}) tokens.emplace_back(t);
    const int n = static_cast<int>(tokens.size());
    return std::make_shared<const pagoda::structured::VocabIndex>(std::move(tokens), n + 1, std::vector<pagoda::TokenId>{n});
  }();
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 2, size - 2);
  try {
    pagoda::structured::Grammar g = data[0] % 2 == 0
                                        ? pagoda::structured::json_schema_grammar(nlohmann::ordered_json::parse(text))
                                        : pagoda::structured::regex_grammar(text);
    constexpr pagoda::structured::ExpansionLimits kLimits{.tops = 100'000, .frames = 100'000, .arena = 100'000};
    pagoda::structured::ConstraintMatcher m(
        pagoda::structured::compile_constraint(std::move(g), vocab(), "fuzz", kLimits));
    // A short walk: the second byte seeds which allowed token to take.
    uint32_t pick = data[1];
    for (int step = 0; step < 16; ++step) {
      const std::vector<uint64_t>& bits = m.allowed_tokens();
      std::vector<pagoda::TokenId> allowed;
      for (pagoda::TokenId id = 0; id < vocab()->num_logits(); ++id)
        if ((bits[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1) allowed.push_back(id);
      if (allowed.empty()) __builtin_trap();  // the mask always offers something (the end token at worst)
      const pagoda::TokenId id = allowed[pick % allowed.size()];
      if (!m.accept(id)) __builtin_trap();
      if (id == vocab()->end_ids()[0]) break;
      pick = pick * 1103515245u + 12345u;
    }
  } catch (const pagoda::InvalidRequest&) {
  } catch (const nlohmann::json::exception&) {
  }
  return 0;
}
