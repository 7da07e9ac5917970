// SafetensorsCheckpoint: the tensors of one .safetensors file or of a sharded checkpoint
// (model.safetensors.index.json), mmap'd, by HF name.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "pagoda/core/dtype.h"
#include "pagoda/core/mapped_file.h"

namespace pagoda {

struct SafetensorsTensor {
  std::string name;
  DType dtype;                 // F32, F16, BF16, or I32/I64/U8/I8/F8_E4M3 (quantized checkpoints); others are
                               // rejected with a LoadError
  std::vector<int64_t> shape;  // row-major
  const std::byte* data;
  size_t nbytes;
  std::string file;  // which shard
};

class SafetensorsCheckpoint {
 public:
  // `path` is a directory (model.safetensors or model.safetensors.index.json inside) or one file.
  // Throws LoadError naming the file: truncated, bad header JSON, offsets outside the file, bad dtype,
  // shape/size mismatch, missing shard.
  static SafetensorsCheckpoint open(const std::string& path);

  const SafetensorsTensor* find(const std::string& name) const;
  const std::map<std::string, SafetensorsTensor>& tensors() const { return tensors_; }
  const std::vector<std::shared_ptr<const MappedFile>>& mappings() const { return mappings_; }
  // The string entries of every file's __metadata__ (e.g. torch's tied-weight aliases,
  // "model.embed_tokens.weight" -> "lm_head.weight"); null when absent.
  const std::string* metadata(const std::string& key) const;
  const std::map<std::string, std::string>& metadata_entries() const { return metadata_; }

 private:
  std::map<std::string, SafetensorsTensor> tensors_;
  std::map<std::string, std::string> metadata_;
  std::vector<std::shared_ptr<const MappedFile>> mappings_;
};

}  // namespace pagoda
