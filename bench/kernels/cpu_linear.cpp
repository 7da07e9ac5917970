// The CPU matrix product (cpu::linear_f32) on a model's projection shapes, for each weight dtype, token
// count and instruction-set level: median and best time of repeated calls, GFLOP/s and weight GB/s (of the
// median).
//
//   bench_cpu_linear [--tokens 1,4,512] [--dtypes f16,bf16,f32,q8_0] [--isa avx2,avx512] [--threads N]
//                    [--shape N:K ...] [--reps R]
//
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
#include "pagoda/backend/cpu/cpu_kernels.h"
#include "pagoda/core/buffer.h"

using namespace pagoda;

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

DType parse_dtype(const std::string& s) {
  if (s == "f16") return DType::kF16;
  if (s == "bf16") return DType::kBF16;
  if (s == "f32") return DType::kF32;
  if (s == "q8_0") return DType::kQ8_0;
  if (s == "q4_0") return DType::kQ4_0;
  std::fprintf(stderr, "unknown dtype %s\n", s.c_str());
  std::exit(2);
}

// Random weight bytes that decode to finite values: small fp16/bf16/fp32 numbers, Q8_0/Q4_0 blocks with a
// small scale.
std::vector<uint8_t> random_weights(DType dtype, int64_t n, int64_t k, std::mt19937& rng) {
  std::vector<uint8_t> bytes(static_cast<size_t>(dtype_storage_bytes(dtype, n * k)));
  std::uniform_real_distribution<float> dist(-0.05f, 0.05f);
  const int64_t elems = n * k;
  for (int64_t i = 0; i < elems; ++i) {
    const float v = dist(rng);
    if (dtype == DType::kF32) std::memcpy(bytes.data() + 4 * i, &v, 4);
    if (dtype == DType::kF16 || dtype == DType::kBF16) {
      const uint16_t h = dtype == DType::kF16 ? f32_to_f16(v) : f32_to_bf16(v);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
  }
  if (dtype == DType::kQ8_0 || dtype == DType::kQ4_0) {
    const int64_t block_bytes = dtype_block_bytes(dtype);
    for (size_t b = 0; b < bytes.size(); b += block_bytes) {
      for (int64_t j = 2; j < block_bytes; ++j) bytes[b + j] = static_cast<uint8_t>(rng());
      const uint16_t d = f32_to_f16(0.001f);
      std::memcpy(bytes.data() + b, &d, 2);
    }
  }
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> tokens = {1, 4, 512};
  std::vector<std::string> dtypes = {"f16", "bf16", "f32", "q8_0"};
  std::vector<std::string> isas = {"avx2", "avx512"};
  std::vector<std::pair<int64_t, int64_t>> shapes;
  int reps = 5;
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
    const DType dtype = parse_dtype(dtype_name_s);
    for (const auto& [n, k] : shapes) {
      const std::vector<uint8_t> w = random_weights(dtype, n, k, rng);
      for (int64_t t : tokens) {
        HostTensor x_tensor(DType::kF32, {t, k});  // 64-byte aligned, as the engine's activations
        float* x = x_tensor.view().ptr<float>();
        std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
        for (int64_t i = 0; i < t * k; ++i) x[i] = dist(rng);
        std::vector<float> out(static_cast<size_t>(t * n));
        for (const auto& isa_s : isas) {
          const cpu::Isa used = cpu::set_active_isa(isa_s == "avx512" ? cpu::Isa::kAvx512 : cpu::Isa::kAvx2);
          if (cpu::isa_name(used) != isa_s) continue;
          cpu::linear_f32(out.data(), x, t, w.data(), dtype, n, k);  // warm-up
          std::vector<double> us;
          for (int r = 0; r < reps; ++r) {
            const auto t0 = std::chrono::steady_clock::now();
            cpu::linear_f32(out.data(), x, t, w.data(), dtype, n, k);
            us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
          }
          std::sort(us.begin(), us.end());
          const double med = us[us.size() / 2];
          std::printf("%-6s %-5s %6lld %6lld %6lld %10.1f %10.1f %9.1f %9.2f\n", isa_s.c_str(), dtype_name_s.c_str(),
                      static_cast<long long>(t), static_cast<long long>(n), static_cast<long long>(k), med, us.front(),
                      2.0 * t * n * k / med / 1e3, static_cast<double>(w.size()) / med / 1e3);
        }
      }
    }
  }
  return 0;
}
