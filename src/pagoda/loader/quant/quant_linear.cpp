// convert_quantized_linear: the converter for the checkpoint's quant_method.
#include "pagoda/loader/quant/quant_linear.h"

#include "pagoda/core/check.h"

namespace pagoda {

Weight convert_quantized_linear(const QuantLinearSource& src, const QuantConfig& config,
                                std::vector<HostTensor>& owned) {
  switch (config.method) {
    case QuantMethod::kAwq: return convert_awq_linear(src, config, owned);
    case QuantMethod::kGptq: return convert_gptq_linear(src, config, owned);
    case QuantMethod::kCompressedTensors: return convert_compressed_tensors_linear(src, config, owned);
    case QuantMethod::kModelOpt:
    case QuantMethod::kFp8: return convert_fp8_linear(src, config, owned);
    case QuantMethod::kNone: break;
  }
  PAGODA_CHECK(false, "convert_quantized_linear: {} is not quantized", src.module);
  return {};
}

}  // namespace pagoda
