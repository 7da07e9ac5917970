// Fuzz target: a .safetensors file (header JSON, dtypes, shapes, offsets) through SafetensorsCheckpoint,
// then every tensor's first and last byte read (an offset past the mapping would be caught by ASan).
#include "fuzz_input_file.h"
#include "pagoda/core/error.h"
#include "pagoda/loader/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = pagoda::fuzz::write_input(data, size, ".safetensors");
  try {
    const auto checkpoint = pagoda::SafetensorsCheckpoint::open(path);
    volatile std::byte sink{};
    for (const auto& [name, t] : checkpoint.tensors())
      if (t.nbytes > 0) sink = t.data[0] ^ t.data[t.nbytes - 1];
  } catch (const pagoda::Error&) {
  }
  return 0;
}
