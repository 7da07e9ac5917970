// `pagoda`: the command-line entry point. Errors that reach here are reported in one line, exit code 1.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "pagoda/cli/commands.h"
#include "pagoda/core/error.h"
#include "pagoda/core/logging.h"

int main(int argc, char** argv) {
  CLI::App app{"Pagoda: an LLM inference-serving engine"};
  app.set_version_flag("--version", std::string("pagoda ") + PAGODA_VERSION);
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  app.require_subcommand(1);
  pagoda::cli::add_generate_command(app);
  pagoda::cli::add_tokenize_commands(app);
  pagoda::cli::add_inspect_command(app);
  pagoda::cli::add_serve_command(app);
  pagoda::cli::add_bench_command(app);
  pagoda::cli::add_eval_command(app);
  pagoda::cli::add_quantize_command(app);
  pagoda::cli::add_plan_command(app);
  app.parse_complete_callback([&] { pagoda::init_logging(log_level); });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const pagoda::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: unexpected: %s\n", e.what());
    return 1;
  }
  return 0;
}
