// Per-tensor conversions done while loading: undoing llama.cpp's Q/K row permutation and pre-faulting
// mmap'd weights (GGUF block types: gguf_quant.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace pagoda {

// llama.cpp permutes each head's Q/K rows for its interleaved RoPE; Pagoda uses HF's rotate-half order.
// Returns the GGUF row that holds HF row `hf_row`: within a head of size head_dim, HF row j*(hd/2)+i is
// GGUF row 2*i+j (i in [0, hd/2), j in {0, 1}).
int64_t gguf_rope_row(int64_t hf_row, int head_dim);

// Reads one byte per page of [data, data + nbytes) so the first forward pass does not page-fault the
// checkpoint in; returns a value that depends on the reads so they are not optimised away.
uint64_t touch_pages(const void* data, size_t nbytes);

}  // namespace pagoda
