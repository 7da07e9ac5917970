// Fuzz target: a tokenizer.json (model, merges, added tokens, normalizer, pre-tokenizer and decoder
// steps) through load_hf_tokenizer, then encoding and decoding a fixed text with what it built.
#include "fuzz_input_file.h"
#include "pagoda/core/error.h"
#include "pagoda/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = pagoda::fuzz::write_input(data, size, ".tokenizer.json");
  try {
    const auto tok = pagoda::load_hf_tokenizer(path, "");
    const auto ids = tok->encode("Hello  world! <s> caf\xc3\xa9 \xe2\x96\x81 123", pagoda::EncodeOptions{.add_special_tokens = true});
    (void)tok->decode(ids, false);
  } catch (const pagoda::Error&) {
  }
  return 0;
}
