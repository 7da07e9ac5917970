// guided_choice as a grammar (choice_grammar.h).
#include "pagoda/structured/choice_grammar.h"

#include "pagoda/core/error.h"

namespace pagoda::structured {

Grammar choice_grammar(const std::vector<std::string>& choices) {
  if (choices.empty()) throw InvalidRequest("guided_choice needs at least one choice");
  GrammarBuilder b;
  std::vector<GrammarBuilder::Sequence> alts;
  for (const std::string& c : choices) alts.push_back(b.literal(c));
  return b.build(b.rule("root", std::move(alts)));
}

}  // namespace pagoda::structured
