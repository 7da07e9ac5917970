// The loop the int8-block products (linear_w4_int8.cpp, linear_w8_int8.cpp) share: OpenMP over chunks of 16
// weight rows (in shares, chunk_shares.h); with many tokens each thread first unpacks its chunk into a buffer of its own, once for all the
// tokens, then sweeps the chunk over blocks of tokens small enough to stay in L2.
#pragma once

#include <algorithm>
#include <cstdint>

#include "pagoda/backend/cpu/chunk_shares.h"
#include "pagoda/core/buffer.h"

namespace pagoda::cpu {

inline constexpr int64_t kRowsPerChunk = 16;
inline constexpr int64_t kTokensPerBlock = 24;

// prepare(r0, count, buffer) unpacks rows [r0, r0 + count) (when prepared_bytes_per_row > 0); multiply(buffer
// or null, r0, count, t0, t1) computes them for tokens [t0, t1). Runs in parallel when n * k * num_tokens is
// worth it (k: the columns, for that decision only).
template <class Prepare, class Multiply>
void for_each_row_chunk(int64_t n, int64_t k, int64_t num_tokens, int64_t prepared_bytes_per_row, const Prepare& prepare,
                        const Multiply& multiply) {
  const int64_t num_chunks = (n + kRowsPerChunk - 1) / kRowsPerChunk;
  const bool unpack_once = prepared_bytes_per_row > 0;
  const auto bytes = static_cast<size_t>(kRowsPerChunk * prepared_bytes_per_row);
  for_each_chunk(num_chunks, n * k * num_tokens >= (1 << 16), [&](int64_t c) {
    thread_local Buffer prepared;  // this thread's chunk of rows, unpacked
    if (unpack_once && prepared.size() < bytes) prepared = Buffer(bytes);
    auto* buffer = unpack_once ? static_cast<uint8_t*>(prepared.data()) : nullptr;
    const int64_t r0 = c * kRowsPerChunk, count = std::min(kRowsPerChunk, n - r0);
    if (unpack_once) prepare(r0, count, buffer);
    for (int64_t t = 0; t < num_tokens; t += kTokensPerBlock)
      multiply(static_cast<const uint8_t*>(buffer), r0, count, t, std::min(num_tokens, t + kTokensPerBlock));
  });
}

}  // namespace pagoda::cpu
