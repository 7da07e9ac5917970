// A kernel that writes late, for testing what a kernel launched after it with programmatic dependent launch
// (kernels/launch.cuh) reads before its griddepcontrol.wait: it lets the next kernel start at once, waits on the
// GPU's clock, and only then copies. What the next kernel reads before its wait is what the buffers held before.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

namespace pagoda::test {

struct LateCopy {
  const void* src;  // device memory
  void* dst;
  size_t bytes;
};

// On `stream`: one kernel that triggers its dependents (griddepcontrol.launch_dependents) first, spins for
// `delay_us` microseconds, then makes the copies (at most 8).
void launch_late_copies(const std::vector<LateCopy>& copies, int delay_us, cudaStream_t stream);

// Whether the library's kernels launch with PDL on this device (kernels::pdl_enabled()): without it a kernel
// starts after the one before has finished, and nothing is read early.
bool library_uses_pdl();

}  // namespace pagoda::test
