// Calibration text -> token blocks -> layer-0 inputs.
#include "pagoda/quantize/calibration.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "pagoda/core/error.h"
#include "pagoda/core/text_file.h"

namespace pagoda::quantizer {
namespace {

std::string strip(const std::string& s) {
  const char* ws = " \t\r\n\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

}  // namespace

std::vector<std::vector<TokenId>> calibration_blocks(const CalibrationOptions& options, const Tokenizer& tokenizer) {
  std::ifstream in = open_text_file(options.text_file, "the calibration text");
  std::vector<TokenId> all;
  int used = 0;
  for (std::string line; used < options.num_samples && std::getline(in, line);) {
    line = strip(line);
    if (line.empty()) continue;
    const std::vector<TokenId> ids = tokenizer.encode(line, EncodeOptions{});
    if (ids.empty() || ids.size() > static_cast<size_t>(options.seq_len)) continue;
    all.insert(all.end(), ids.begin(), ids.end());
    ++used;
  }
  const size_t num_blocks = all.size() / static_cast<size_t>(options.seq_len);
  if (num_blocks == 0)
    throw Error(fmt::format("{}: {} tokens in {} usable lines, fewer than one calibration block of {} tokens "
                            "(--calibration-seq-len)", options.text_file, all.size(), used, options.seq_len));
  std::vector<std::vector<TokenId>> blocks(num_blocks);
  for (size_t b = 0; b < num_blocks; ++b)
    blocks[b].assign(all.begin() + static_cast<std::ptrdiff_t>(b * options.seq_len),
                     all.begin() + static_cast<std::ptrdiff_t>((b + 1) * options.seq_len));
  return blocks;
}

Matrix embed_blocks(const std::vector<std::vector<TokenId>>& blocks, const Matrix& embed) {
  const int64_t seq_len = blocks.empty() ? 0 : static_cast<int64_t>(blocks[0].size());
  Matrix x(static_cast<int64_t>(blocks.size()) * seq_len, embed.cols);
  for (size_t b = 0; b < blocks.size(); ++b)
    for (int64_t t = 0; t < seq_len; ++t) {
      const TokenId id = blocks[b][static_cast<size_t>(t)];
      if (id < 0 || id >= embed.rows) throw Error(fmt::format("calibration token {} is outside the vocabulary", id));
      std::memcpy(x.row(static_cast<int64_t>(b) * seq_len + t), embed.row(id), sizeof(float) * static_cast<size_t>(embed.cols));
    }
  return x;
}

}  // namespace pagoda::quantizer
