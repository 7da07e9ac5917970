// `pagoda serve`: placeholder registration until the OpenAI-compatible server lands (issue #4).
#include "pagoda/cli/commands.h"
#include "pagoda/core/error.h"

namespace pagoda::cli {

void add_serve_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API");
  cmd->callback([] { throw Error("serve is not available yet"); });
}

}  // namespace pagoda::cli
