// EditableCheckpoint: one of the reference variants (tests/data/models/quant/) read into memory, its config.json
// and tensors open to edits, written back as a checkpoint directory: for checkpoints that differ from a
// reference in one place (a broken tensor, another config field, tensors of another format).
#pragma once

#include <cstring>
#include <fstream>
#include <map>

#include "../loader/test_files.h"

namespace pagoda::test {

struct EditableCheckpoint {
  nlohmann::ordered_json config;  // in the file's key order
  struct Entry {
    std::string dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> data;
  };
  std::map<std::string, Entry> tensors;
  nlohmann::json metadata;
  nlohmann::json hf_quant_config;  // ModelOpt's side file; written when set

  explicit EditableCheckpoint(const std::string& variant) {
    const std::string dir = data_dir() + "/models/quant/" + variant;
    std::ifstream cfg(dir + "/config.json");
    config = nlohmann::ordered_json::parse(cfg);
    const std::vector<uint8_t> bytes = read_bytes(dir + "/model.safetensors");
    uint64_t header_len = 0;
    std::memcpy(&header_len, bytes.data(), 8);
    const nlohmann::json header =
        nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<int64_t>(header_len));
    for (const auto& [name, e] : header.items()) {
      if (name == "__metadata__") {
        metadata = e;
        continue;
      }
      const auto begin = e["data_offsets"][0].get<size_t>(), end = e["data_offsets"][1].get<size_t>();
      const auto* base = bytes.data() + 8 + header_len;
      tensors[name] = {e["dtype"].get<std::string>(), e["shape"].get<std::vector<int64_t>>(),
                       std::vector<uint8_t>(base + begin, base + end)};
    }
  }
  Entry& at(const std::string& name) { return tensors.at(name); }
  // Replaces a tensor's dtype and shape with zero bytes of the right size.
  void reshape(const std::string& name, const std::string& dtype, std::vector<int64_t> shape, int elem_bytes) {
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    tensors[name] = {dtype, std::move(shape), std::vector<uint8_t>(static_cast<size_t>(numel * elem_bytes), 0)};
  }
  std::string write(const TempDir& dir) const {
    SafetensorsWriter w;
    for (const auto& [name, e] : tensors) w.tensor(name, e.dtype, e.shape, e.data);
    nlohmann::json header = w.header();
    header["__metadata__"] = metadata;
    std::string h = header.dump();
    while ((8 + h.size()) % 8 != 0) h += ' ';
    write_bytes(dir.file("model.safetensors"), w.build_with_header(h));
    write_text(dir.file("config.json"), config.dump());
    if (!hf_quant_config.is_null()) write_text(dir.file("hf_quant_config.json"), hf_quant_config.dump());
    return dir.path();
  }
};

}  // namespace pagoda::test
