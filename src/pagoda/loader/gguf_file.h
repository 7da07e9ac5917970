// GgufFile: a parsed GGUF (v2/v3) file — typed metadata and tensor directory over an mmap. Tensor shapes
// are given row-major (outermost first), i.e. reversed from GGML's ne[] order.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "pagoda/core/dtype.h"
#include "pagoda/core/mapped_file.h"
#include "pagoda/loader/gguf_blocks.h"

namespace pagoda {

struct GgufArray;
using GgufValue = std::variant<uint64_t, int64_t, double, bool, std::string, std::shared_ptr<GgufArray>>;
struct GgufArray {
  std::vector<GgufValue> values;
};

struct GgufTensorInfo {
  std::string name;
  GgmlType type;               // the stored GGML type (one Pagoda loads: gguf_blocks.h)
  DType dtype;                 // the dtype naming those bytes (F32, F16, BF16, Q8_0, Q4_0); kU8 for the block
                               // types that have none (Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K: read by decoders)
  std::vector<int64_t> shape;  // row-major: shape.back() is GGML's ne[0]
  const std::byte* data;       // into the mapping
  size_t nbytes;
};

class GgufFile {
 public:
  // Throws LoadError naming the path: bad magic, unsupported version, truncated header, tensor data
  // outside the file or overlapping another tensor's, unsupported tensor type (named), a row length that is
  // not whole blocks of its type, duplicate tensor.
  explicit GgufFile(const std::string& path);

  const std::string& path() const { return file_->path(); }
  uint32_t version() const { return version_; }
  std::shared_ptr<const MappedFile> mapping() const { return file_; }

  bool has(const std::string& key) const { return metadata_.count(key) != 0; }
  const GgufValue* find(const std::string& key) const;
  // Typed getters: nullopt when absent; LoadError when present with an incompatible type.
  std::optional<std::string> get_string(const std::string& key) const;
  std::optional<int64_t> get_int(const std::string& key) const;  // any integer type
  std::optional<double> get_float(const std::string& key) const;  // float or integer
  std::optional<bool> get_bool(const std::string& key) const;
  std::optional<std::vector<std::string>> get_strings(const std::string& key) const;
  std::optional<std::vector<double>> get_floats(const std::string& key) const;
  std::optional<std::vector<int64_t>> get_ints(const std::string& key) const;
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(const std::string& name) const;

 private:
  std::shared_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

}  // namespace pagoda
