// Copies mapped weights into owned, huge-page-advised buffers.
#include "pagoda/loader/weight_residency.h"

#include <cstring>
#include <map>

namespace pagoda {
namespace {

bool in_mapping(const LoadedModel& m, const void* p) {
  for (const auto& mapping : m.mappings) {
    const auto* b = mapping->data();
    if (p >= static_cast<const void*>(b) && p < static_cast<const void*>(b + mapping->size())) return true;
  }
  return false;
}

}  // namespace

void copy_weights_into_memory(LoadedModel& m) {
  std::map<const void*, void*> copied;  // tied weights share one copy
  for (Weight* w : m.weights.all()) {
    if (w->data.data == nullptr || !in_mapping(m, w->data.data)) continue;
    auto it = copied.find(w->data.data);
    if (it == copied.end()) {
      // Huge pages cut TLB misses when every token streams all weights (best effort: THP may be off).
      HostTensor& t = m.owned.emplace_back(w->data.dtype, std::span<const int64_t>(w->data.shape.data(), w->data.ndim),
                                           Buffer::Init::kHugePages);
      const size_t nbytes = static_cast<size_t>(w->data.nbytes());
      std::memcpy(t.view().data, w->data.data, nbytes);
      it = copied.emplace(w->data.data, t.view().data).first;
    }
    w->data.data = it->second;
  }
  m.mappings.clear();
}

}  // namespace pagoda
