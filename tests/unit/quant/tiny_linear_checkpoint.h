// TinyCheckpoint: one quantized linear "m" written into a temp dir and converted by the loader's converter for
// a hand-made QuantConfig, for tests that write the checkpoint's bytes themselves; and what they check it with.
#pragma once

#include <vector>

#include "../loader/test_files.h"
#include "pagoda/backend/cpu/linear_quant.h"
#include "pagoda/loader/quant/quant_linear.h"

namespace pagoda::test {

inline std::vector<uint8_t> f16_bytes(const std::vector<float>& v) {
  std::vector<uint16_t> h;
  for (float f : v) h.push_back(f32_to_f16(f));
  return to_bytes(h);
}

inline std::vector<float> dequantize_all(const Weight& w) {
  std::vector<float> out(static_cast<size_t>(w.num_rows() * w.cols()));
  cpu::dequantize_rows(w, 0, w.num_rows(), out.data());
  return out;
}

// The converter reads the tensors through the mapping: keep the TinyCheckpoint alive while the Weight is used.
struct TinyCheckpoint {
  TempDir dir;
  std::vector<HostTensor> owned;
  Weight load(const SafetensorsWriter& w, const QuantConfig& config, int64_t n, int64_t k) {
    w.write(dir.file("m.safetensors"));
    ckpt = SafetensorsCheckpoint::open(dir.file("m.safetensors"));
    return convert_quantized_linear(QuantLinearSource{ckpt, "m.safetensors", "m", n, k}, config, owned);
  }
  SafetensorsCheckpoint ckpt;
};

}  // namespace pagoda::test
