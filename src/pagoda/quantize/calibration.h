// Calibration data for AWQ, as AutoAWQ's get_calib_dataset builds it: the first `num_samples` non-empty lines
// of the text that tokenize to at most `seq_len` tokens (BOS included, as tokenizer.encode adds it), concatenated
// and cut into blocks of `seq_len` tokens (the remainder dropped).
#pragma once

#include <string>
#include <vector>

#include "pagoda/core/types.h"
#include "pagoda/quantize/matrix.h"
#include "pagoda/tokenizer/tokenizer.h"

namespace pagoda::quantizer {

struct CalibrationOptions {
  std::string text_file;  // the calibration text
  int num_samples = 128;  // AutoAWQ max_calib_samples
  int seq_len = 512;      // AutoAWQ max_calib_seq_len
};

// The blocks ([num_blocks][seq_len]); an Error naming the file when it cannot be read or yields no block.
std::vector<std::vector<TokenId>> calibration_blocks(const CalibrationOptions& options, const Tokenizer& tokenizer);

// The embeddings of every block's tokens: [num_blocks * seq_len, hidden] from `embed` [vocab, hidden].
Matrix embed_blocks(const std::vector<std::vector<TokenId>>& blocks, const Matrix& embed);

}  // namespace pagoda::quantizer
