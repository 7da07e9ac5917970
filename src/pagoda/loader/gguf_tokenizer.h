// Reading the embedded tokenizer (tokenizer.ggml.*) of a GGUF file into a GgufVocab and a Tokenizer.
#pragma once

#include <memory>

#include "pagoda/loader/gguf_file.h"
#include "pagoda/tokenizer/gguf_vocab.h"

namespace pagoda {

// Throws LoadError naming the file when the tokenizer keys are missing or malformed.
GgufVocab read_gguf_vocab(const GgufFile& file);
std::unique_ptr<Tokenizer> load_gguf_tokenizer(const GgufFile& file);

}  // namespace pagoda
