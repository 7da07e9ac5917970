// `pagoda eval`: measurements of a model's quality (so far: perplexity).
#include "pagoda/cli/commands.h"

namespace pagoda::cli {

void add_eval_command(CLI::App& app) {
  CLI::App* eval = app.add_subcommand("eval", "Measure a model's quality: perplexity");
  eval->require_subcommand(1);
  add_eval_perplexity_command(*eval);
}

}  // namespace pagoda::cli
