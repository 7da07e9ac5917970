// Fuzz target: a .gguf file through the whole model load (GgufFile's metadata and tensor directory, the
// config, the GGUF vocabulary into a tokenizer, the weight views and conversions), then a tokenizer round
// trip when one was built.
#include "fuzz_input_file.h"
#include "pagoda/core/error.h"
#include "pagoda/loader/model_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = pagoda::fuzz::write_input(data, size, ".gguf");
  try {
    pagoda::LoadedModel m = pagoda::load_model(pagoda::LoadOptions{.model_path = path, .show_progress = false});
    if (m.tokenizer) (void)m.tokenizer->decode(m.tokenizer->encode("Hello world", {}), false);
  } catch (const pagoda::Error&) {
  }
  return 0;
}
