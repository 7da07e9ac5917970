// The engine's scenarios (engine_scenarios.h) on the CPU backend; tests/unit/cuda/
// test_engine_scenarios_gpu.cpp runs them on CUDA.
#include "engine_scenarios.h"

namespace pagoda::testing {

INSTANTIATE_TEST_SUITE_P(Cpu, EngineScenarios,
                         ::testing::Combine(::testing::Values("cpu"), ::testing::Values("stories260K", "tiny-llama3-hf")));

}  // namespace pagoda::testing
