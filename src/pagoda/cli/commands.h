// The `pagoda` subcommands. Each registers its options on the app and runs when selected.
#pragma once

#include <CLI/CLI.hpp>

namespace pagoda::cli {

void add_generate_command(CLI::App& app);
void add_tokenize_commands(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_serve_command(CLI::App& app);
void add_bench_command(CLI::App& app);
// `pagoda bench serve`, registered by add_bench_command.
void add_bench_serve_command(CLI::App& bench);
void add_eval_command(CLI::App& app);
// `pagoda eval perplexity`, registered by add_eval_command.
void add_eval_perplexity_command(CLI::App& eval);
void add_quantize_command(CLI::App& app);
void add_plan_command(CLI::App& app);

}  // namespace pagoda::cli
