// Safetensors writer: tensors in name order, each right after the previous (data_offsets relative to the
// end of the header), header padded with spaces as the safetensors library and the reference packer do.
#include "pagoda/loader/safetensors_writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "pagoda/core/error.h"

namespace pagoda {
namespace {

// A JSON string as Python's json.dumps writes it (ensure_ascii: non-ASCII as \uXXXX).
std::string json_string(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace);
}

std::vector<const SafetensorsEntry*> sorted(const std::vector<SafetensorsEntry>& entries) {
  std::vector<const SafetensorsEntry*> out;
  for (const SafetensorsEntry& e : entries) out.push_back(&e);
  std::sort(out.begin(), out.end(), [](const auto* a, const auto* b) { return a->name < b->name; });
  return out;
}

}  // namespace

std::string safetensors_header(const std::vector<SafetensorsEntry>& entries,
                               const std::vector<std::pair<std::string, std::string>>& metadata) {
  std::string h = "{";
  uint64_t offset = 0;
  bool first = true;
  for (const SafetensorsEntry* e : sorted(entries)) {
    std::string shape;
    for (size_t i = 0; i < e->shape.size(); ++i) shape += fmt::format("{}{}", i ? "," : "", e->shape[i]);
    const uint64_t end = offset + e->data.size();
    h += fmt::format("{}{}:{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}", first ? "" : ",",
                     json_string(e->name), dtype_name(e->dtype), shape, offset, end);
    offset = end;
    first = false;
  }
  if (!metadata.empty()) {
    h += fmt::format("{}\"__metadata__\":{{", first ? "" : ",");
    for (size_t i = 0; i < metadata.size(); ++i)
      h += fmt::format("{}{}:{}", i ? "," : "", json_string(metadata[i].first), json_string(metadata[i].second));
    h += "}";
  }
  return h + "}";
}

void write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& entries,
                       const std::vector<std::pair<std::string, std::string>>& metadata) {
  for (const SafetensorsEntry& e : entries) {
    int64_t numel = 1;
    for (int64_t d : e.shape) numel *= d;
    if (static_cast<int64_t>(e.data.size()) != dtype_storage_bytes(e.dtype, numel))
      throw LoadError(path, fmt::format("tensor {} has {} bytes for its shape of {} elements", e.name, e.data.size(),
                                        numel));
  }
  std::string header = safetensors_header(entries, metadata);
  header.append((8 - header.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw LoadError(path, "cannot open for writing");
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(header.size()) >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  for (const SafetensorsEntry* e : sorted(entries))
    out.write(reinterpret_cast<const char*>(e->data.data()), static_cast<std::streamsize>(e->data.size()));
  out.close();
  if (!out) throw LoadError(path, "write failed (disk full?)");
}

}  // namespace pagoda
