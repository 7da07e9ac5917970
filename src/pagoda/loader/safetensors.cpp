// Safetensors reading: one file (8-byte header length + JSON header + data) or a sharded checkpoint
// described by model.safetensors.index.json. Tensors stay in the mmap; every offset is validated.
#include "pagoda/loader/safetensors.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>
#include <vector>

#include "pagoda/core/error.h"

namespace pagoda {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The safetensors format caps the header at 100 MB; anything larger is corrupt, and this bound keeps a
// bogus length from turning into a huge parse.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

std::optional<DType> dtype_from_string(const std::string& s) {
  if (s == "F32") return DType::kF32;
  if (s == "F16") return DType::kF16;
  if (s == "BF16") return DType::kBF16;
  // Quantized checkpoints: packed codes (I32, U8, I8), shapes (I64), FP8 weights.
  if (s == "I32") return DType::kI32;
  if (s == "I64") return DType::kI64;
  if (s == "U8") return DType::kU8;
  if (s == "I8") return DType::kI8;
  if (s == "F8_E4M3") return DType::kF8E4M3;
  return std::nullopt;
}

// Parses one file's header and adds its tensors to `out`.
void read_file_tensors(const std::shared_ptr<const MappedFile>& file, std::map<std::string, SafetensorsTensor>& out,
                       std::map<std::string, std::string>& metadata) {
  const std::string& path = file->path();
  const uint64_t size = file->size();
  if (size < 8) throw LoadError(path, fmt::format("truncated safetensors file ({} bytes, no header length)", size));
  uint64_t header_len = 0;
  std::memcpy(&header_len, file->data(), 8);
  if (header_len > size - 8)
    throw LoadError(path, fmt::format("header length {} is beyond the end of the file ({} bytes): truncated or corrupt",
                                      header_len, size));
  if (header_len > kMaxHeaderBytes)
    throw LoadError(path, fmt::format("header length {} exceeds the 100 MB safetensors limit", header_len));

  // A tensor named twice would keep its last entry (JSON objects keep one value per key): refused while parsing,
  // as the safetensors library refuses it.
  std::set<std::string> names;
  std::string duplicate;
  const json::parser_callback_t note_duplicates = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key && !names.insert(parsed.get<std::string>()).second &&
        duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  json header;
  try {
    header = json::parse(reinterpret_cast<const char*>(file->data()) + 8,
                         reinterpret_cast<const char*>(file->data()) + 8 + header_len, note_duplicates);
  } catch (const json::exception& e) {
    throw LoadError(path, std::string("bad safetensors header JSON: ") + e.what());
  }
  if (!duplicate.empty()) throw LoadError(path, fmt::format("tensor {} is in the header twice", duplicate));
  if (!header.is_object()) throw LoadError(path, "bad safetensors header: not a JSON object");

  const std::byte* data_base = file->data() + 8 + header_len;
  const uint64_t data_size = size - 8 - header_len;
  std::vector<std::tuple<uint64_t, uint64_t, std::string>> spans;  // [begin, end) of each tensor, and its name
  for (const auto& item : header.items()) {
    const std::string& name = item.key();  // not a structured binding: lambdas below capture it (clang 14)
    const json& entry = item.value();
    if (name == "__metadata__") {
      if (entry.is_object())
        for (const auto& [key, value] : entry.items())
          if (value.is_string()) metadata[key] = value.get<std::string>();
      continue;
    }
    auto bad = [&](const std::string& problem) { return LoadError(path, fmt::format("tensor {}: {}", name, problem)); };
    if (!entry.is_object()) throw bad("header entry is not an object");
    const auto dtype_it = entry.find("dtype");
    const auto shape_it = entry.find("shape");
    const auto offsets_it = entry.find("data_offsets");
    if (dtype_it == entry.end() || !dtype_it->is_string()) throw bad("missing or non-string dtype");
    if (shape_it == entry.end() || !shape_it->is_array()) throw bad("missing or non-array shape");
    if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2)
      throw bad("data_offsets must be [begin, end]");

    SafetensorsTensor t;
    t.name = name;
    t.file = path;
    const std::string dtype_str = dtype_it->get<std::string>();
    const auto dtype = dtype_from_string(dtype_str);
    if (!dtype) throw bad(fmt::format("unsupported dtype {} (supported: F32, F16, BF16, I32, I64, U8, I8, F8_E4M3)", dtype_str));
    t.dtype = *dtype;

    uint64_t numel = 1;
    for (const auto& d : *shape_it) {
      if (!d.is_number_unsigned()) throw bad("shape entries must be non-negative integers");
      const uint64_t n = d.get<uint64_t>();
      if (n != 0 && numel > (uint64_t{1} << 48) / n) throw bad("shape is impossibly large");
      numel *= n;
      t.shape.push_back(static_cast<int64_t>(n));
    }
    if (t.shape.size() > 4) throw bad(fmt::format("{} dimensions (at most 4 supported)", t.shape.size()));

    const auto& begin_j = (*offsets_it)[0];
    const auto& end_j = (*offsets_it)[1];
    if (!begin_j.is_number_unsigned() || !end_j.is_number_unsigned())
      throw bad("data_offsets must be non-negative integers");
    const uint64_t begin = begin_j.get<uint64_t>();
    const uint64_t end = end_j.get<uint64_t>();
    if (begin > end || end > data_size)
      throw bad(fmt::format("data_offsets [{}, {}] lie outside the file's {} data bytes", begin, end, data_size));
    const uint64_t expected = numel * static_cast<uint64_t>(dtype_block_bytes(t.dtype));
    if (end - begin != expected)
      throw bad(fmt::format("data_offsets span {} bytes but shape [{}] of {} needs {}", end - begin,
                            fmt::join(t.shape, ", "), dtype_str, expected));
    t.data = data_base + begin;
    t.nbytes = static_cast<size_t>(end - begin);
    spans.emplace_back(begin, end, name);
    if (out.count(name) != 0)
      throw LoadError(path, fmt::format("tensor {} also appears in {}", name, out.at(name).file));
    out.emplace(name, std::move(t));
  }
  // The tensors tile the data bytes, in order of their offsets, with no gap, overlap or trailing bytes (the
  // safetensors library's Metadata::validate): two tensors sharing bytes would both load, one of them wrong.
  std::sort(spans.begin(), spans.end());
  uint64_t at = 0;
  for (const auto& [begin, end, name] : spans) {
    if (begin != at)
      throw LoadError(path, fmt::format("tensor {}: data_offsets [{}, {}] {} the tensor before it, which ends at {}", name,
                                        begin, end, begin < at ? "overlap" : "leave a gap after", at));
    at = end;
  }
  if (at != data_size)
    throw LoadError(path, fmt::format("the tensors' data ends at byte {} of the {} data bytes after the header", at, data_size));
}

json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw LoadError(path, "cannot open");
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw LoadError(path, std::string("bad JSON: ") + e.what());
  }
}

}  // namespace

SafetensorsCheckpoint SafetensorsCheckpoint::open(const std::string& path) {
  SafetensorsCheckpoint ckpt;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    auto file = std::make_shared<const MappedFile>(path);
    read_file_tensors(file, ckpt.tensors_, ckpt.metadata_);
    ckpt.mappings_.push_back(std::move(file));
    return ckpt;
  }

  const fs::path dir(path);
  const fs::path index_path = dir / "model.safetensors.index.json";
  const fs::path single_path = dir / "model.safetensors";
  if (!fs::exists(index_path, ec)) {
    if (!fs::exists(single_path, ec))
      throw LoadError(path, "no model.safetensors or model.safetensors.index.json in the directory");
    return open(single_path.string());
  }

  const std::string index_str = index_path.string();
  const json index = read_json_file(index_str);
  const auto wm = index.is_object() ? index.find("weight_map") : index.end();
  if (wm == index.end() || !wm->is_object()) throw LoadError(index_str, "missing or non-object weight_map");

  std::set<std::string> shards;
  for (const auto& [name, shard] : wm->items()) {
    if (!shard.is_string()) throw LoadError(index_str, fmt::format("weight_map entry {} is not a file name", name));
    const std::string s = shard.get<std::string>();
    // Shards live next to the index; a path that climbs out of the directory is not a checkpoint.
    if (s.empty() || fs::path(s).is_absolute() || s.find("..") != std::string::npos)
      throw LoadError(index_str, fmt::format("weight_map entry {} names an invalid shard '{}'", name, s));
    shards.insert(s);
  }
  for (const std::string& shard : shards) {
    const fs::path shard_path = dir / shard;
    if (!fs::exists(shard_path, ec))
      throw LoadError(shard_path.string(), fmt::format("missing shard listed in {}", index_str));
    auto file = std::make_shared<const MappedFile>(shard_path.string());
    read_file_tensors(file, ckpt.tensors_, ckpt.metadata_);
    ckpt.mappings_.push_back(std::move(file));
  }
  for (const auto& [name, shard] : wm->items()) {
    const auto it = ckpt.tensors_.find(name);
    const std::string shard_path = (dir / shard.get<std::string>()).string();
    if (it == ckpt.tensors_.end())
      throw LoadError(shard_path, fmt::format("tensor {} listed in {} is not in the shard", name, index_str));
    if (it->second.file != shard_path)
      throw LoadError(it->second.file, fmt::format("tensor {} is here but {} maps it to {}", name, index_str,
                                                   shard.get<std::string>()));
  }
  return ckpt;
}

const SafetensorsTensor* SafetensorsCheckpoint::find(const std::string& name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

const std::string* SafetensorsCheckpoint::metadata(const std::string& key) const {
  const auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

}  // namespace pagoda
