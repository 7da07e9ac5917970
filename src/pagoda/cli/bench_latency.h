// `pagoda bench latency`: how long one batch takes, split into prefill and decode (as `vllm bench latency`
// reports end-to-end latency, with the two phases apart).
#pragma once

#include <CLI/CLI.hpp>

namespace pagoda::cli {

void add_bench_latency_command(CLI::App& bench);

}  // namespace pagoda::cli
