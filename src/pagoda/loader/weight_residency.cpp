// Copies mapped weights into owned, huge-page-advised buffers.
#include "pagoda/loader/weight_residency.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <vector>

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

int64_t release_unreferenced_storage(LoadedModel& m, const std::vector<const ModelWeights*>& also_in_use) {
  std::vector<const char*> in_use;
  std::vector<const ModelWeights*> sets = also_in_use;
  sets.push_back(&m.weights);
  for (const ModelWeights* set : sets)
    for (const Weight* w : set->all())
      for (const Tensor* t : w->tensors())
        if (!t->empty()) in_use.push_back(static_cast<const char*>(t->data));
  std::sort(in_use.begin(), in_use.end());
  int64_t freed = 0;
  std::erase_if(m.owned, [&](const HostTensor& h) {
    const auto* begin = static_cast<const char*>(h.view().data);
    const auto* end = begin + h.view().nbytes();
    const auto first = std::lower_bound(in_use.begin(), in_use.end(), begin);
    const bool referenced = first != in_use.end() && *first < end;
    if (!referenced) freed += h.view().nbytes();
    return !referenced;
  });
  return freed;
}

}  // namespace pagoda
