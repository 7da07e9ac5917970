// The engine's scenarios (tests/unit/engine/engine_scenarios.h) on the CUDA backend, greedy tokens
// against the CPU backend's. SKIPPED without a GPU.
#include "../engine/engine_scenarios.h"

namespace pagoda::testing {

INSTANTIATE_TEST_SUITE_P(Cuda, EngineScenarios,
                         ::testing::Combine(::testing::Values("cuda"), ::testing::Values("stories260K", "tiny-llama3-hf"),
                                            ::testing::Values("auto")));

}  // namespace pagoda::testing
