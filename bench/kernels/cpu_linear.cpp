// The CPU matrix product on a model's projection shapes, for each weight kind, token count and
// instruction-set level: median and best time of repeated calls, GFLOP/s and weight GB/s (of the median,
// bytes as the kernel reads them). f16, bf16, f32: cpu::linear_f32; q4_0, q8_0: the forms GGUF's Q4_0 and
// Q8_0 are converted to at load (int4 / int8 groups of 32 with fp32 scales, int8 activation blocks), through
// cpu::linear_quant_f32.
//
//   bench_cpu_linear [--tokens 1,4,512] [--dtypes f16,bf16,f32,q8_0,q4_0] [--isa avx2,avx512] [--threads N]
//                    [--shape N:K ...] [--reps R] [--copies C]
//
// --copies C: C weights of each shape, each call taking the next, so that a run streams its weights from memory as
// decode does (C x the weight bytes past the last-level cache) instead of reading one weight from the cache.
// Default shapes: TinyLlama-1.1B's q/o (2048x2048), k/v (256x2048), gate/up (5632x2048) and down (2048x5632).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "pagoda/backend/cpu/cpu_isa.h"
#include "pagoda/backend/cpu/compact_weights.h"
#include "pagoda/backend/cpu/cpu_kernels.h"
#include "pagoda/backend/cpu/linear_quant.h"
#include "pagoda/core/buffer.h"

using namespace pagoda;

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

// A weight of one kind, random: plain dtypes as bytes, the GGUF-converted kinds as a Weight.
struct BenchWeight {
  DType dtype = DType::kF32;
  std::vector<uint8_t> bytes;      // plain dtypes
  std::vector<HostTensor> owned;   // quantized kinds
  Weight weight;
  bool quantized() const { return weight.quantized(); }
  int64_t nbytes() const { return quantized() ? weight.nbytes() : static_cast<int64_t>(bytes.size()); }
};

BenchWeight random_weight(const std::string& kind, int64_t n, int64_t k, std::mt19937& rng) {
  BenchWeight b;
  if (kind == "q4_0" || kind == "q8_0") {  // random codes, scales 2^-10, Q4_0's zero point 8
    const bool int4 = kind == "q4_0";
    const int64_t groups = k / 32;
    const int64_t code_dims[2] = {n, int4 ? k / 2 : k};  // in huge pages, as the loader allocates them
    b.owned.emplace_back(int4 ? DType::kU8 : DType::kI8, std::span<const int64_t>(code_dims), Buffer::Init::kHugePages);
    for (int64_t i = 0; i < b.owned.back().view().numel(); ++i) b.owned.back().view().ptr<uint8_t>()[i] = static_cast<uint8_t>(rng());
    b.owned.emplace_back(DType::kF32, std::initializer_list<int64_t>{n, groups});
    // 2^-10: exact in fp16, so the weight takes the fp16-scale form the engine gives GGUF files (compact_weights.h)
    for (int64_t i = 0; i < n * groups; ++i) b.owned.back().view().ptr<float>()[i] = 0x1p-10f;
    Weight& w = b.weight;
    w.data = b.owned[0].view();
    w.scales = b.owned[1].view();
    if (int4) {
      b.owned.emplace_back(DType::kU8, std::initializer_list<int64_t>{n, groups});
      std::memset(b.owned.back().view().data, 8, static_cast<size_t>(n * groups));
      w.zeros = b.owned.back().view();
    }
    w.scheme = int4 ? QuantScheme::kInt4Group : QuantScheme::kInt8Channel;
    w.group_size = 32;
    w.in_features = k;
    w.activations = ActivationQuant::kInt8Block;
    b.weight = cpu::compact_weight(w, b.owned);
    return b;
  }
  if (kind == "f16") b.dtype = DType::kF16;
  else if (kind == "bf16") b.dtype = DType::kBF16;
  else if (kind == "f32") b.dtype = DType::kF32;
  else {
    std::fprintf(stderr, "unknown dtype %s\n", kind.c_str());
    std::exit(2);
  }
  b.bytes.resize(static_cast<size_t>(dtype_storage_bytes(b.dtype, n * k)));
  std::uniform_real_distribution<float> dist(-0.05f, 0.05f);
  for (int64_t i = 0; i < n * k; ++i) {
    const float v = dist(rng);
    if (b.dtype == DType::kF32) std::memcpy(b.bytes.data() + 4 * i, &v, 4);
    if (b.dtype == DType::kF16 || b.dtype == DType::kBF16) {
      const uint16_t h = b.dtype == DType::kF16 ? f32_to_f16(v) : f32_to_bf16(v);
      std::memcpy(b.bytes.data() + 2 * i, &h, 2);
    }
  }
  return b;
}

void multiply(float* out, const float* x, int64_t t, const BenchWeight& w, int64_t n, int64_t k) {
  if (w.quantized()) return cpu::linear_quant_f32(out, x, t, w.weight);
  cpu::linear_f32(out, x, t, w.bytes.data(), w.dtype, n, k);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> tokens = {1, 4, 512};
  std::vector<std::string> dtypes = {"f16", "bf16", "f32", "q8_0", "q4_0"};
  std::vector<std::string> isas = {"avx2", "avx512"};
  std::vector<std::pair<int64_t, int64_t>> shapes;
  int reps = 5;
  int copies = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--tokens") {
      tokens.clear();
      for (const auto& t : split(value)) tokens.push_back(std::stoll(t));
    } else if (flag == "--dtypes") {
      dtypes = split(value);
    } else if (flag == "--isa") {
      isas = split(value);
    } else if (flag == "--threads") {
      omp_set_num_threads(std::stoi(value));
    } else if (flag == "--shape") {
      const auto colon = value.find(':');
      shapes.emplace_back(std::stoll(value.substr(0, colon)), std::stoll(value.substr(colon + 1)));
    } else if (flag == "--copies") {
      copies = std::stoi(value);
    } else if (flag == "--reps") {
      reps = std::stoi(value);
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (shapes.empty()) shapes = {{2048, 2048}, {256, 2048}, {5632, 2048}, {2048, 5632}};

  std::printf("threads %d, cpu avx512 %d, avx512_vnni %d\n", omp_get_max_threads(), cpu::cpu_features().avx512,
              cpu::cpu_features().avx512_vnni);
  std::printf("%-6s %-5s %6s %6s %6s %10s %10s %9s %9s\n", "isa", "dtype", "tokens", "n", "k", "median_us", "best_us",
              "GFLOP/s", "wGB/s");
  std::mt19937 rng(1);
  for (const auto& dtype_name_s : dtypes) {
    for (const auto& [n, k] : shapes) {
      std::vector<BenchWeight> ws;
      for (int c = 0; c < copies; ++c) ws.push_back(random_weight(dtype_name_s, n, k, rng));
      const BenchWeight& w = ws.front();
      for (int64_t t : tokens) {
        HostTensor x_tensor(DType::kF32, {t, k});  // 64-byte aligned, as the engine's activations
        float* x = x_tensor.view().ptr<float>();
        std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
        for (int64_t i = 0; i < t * k; ++i) x[i] = dist(rng);
        std::vector<float> out(static_cast<size_t>(t * n));
        for (const auto& isa_s : isas) {
          const cpu::Isa used = cpu::set_active_isa(isa_s == "avx512" ? cpu::Isa::kAvx512 : cpu::Isa::kAvx2);
          if (cpu::isa_name(used) != isa_s) continue;
          for (const BenchWeight& each : ws) multiply(out.data(), x, t, each, n, k);  // warm-up
          std::vector<double> us;
          for (int r = 0; r < reps * copies; ++r) {
            const auto t0 = std::chrono::steady_clock::now();
            multiply(out.data(), x, t, ws[static_cast<size_t>(r % copies)], n, k);
            us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
          }
          std::sort(us.begin(), us.end());
          const double med = us[us.size() / 2];
          std::printf("%-6s %-5s %6lld %6lld %6lld %10.1f %10.1f %9.1f %9.2f\n", isa_s.c_str(), dtype_name_s.c_str(),
                      static_cast<long long>(t), static_cast<long long>(n), static_cast<long long>(k), med, us.front(),
                      2.0 * t * n * k / med / 1e3, static_cast<double>(w.nbytes()) / med / 1e3);
        }
      }
    }
  }
  return 0;
}
