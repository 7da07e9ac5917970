// GGUF v2/v3 parsing: header, typed metadata (including nested arrays), tensor directory and data offsets.
// Every read is bounds-checked against the mapping so that a malformed file is a LoadError, never a crash.
#include "pagoda/loader/gguf_file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "pagoda/core/error.h"

namespace pagoda {
namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as little-endian uint32
constexpr uint64_t kDefaultAlignment = 32;
constexpr int kMaxArrayDepth = 8;   // GGUF writers nest at most one level; deeper is surely corrupt
constexpr uint32_t kMaxDims = 4;    // GGML_MAX_DIMS
// Array elements a file may hold in all, nested ones included. The largest real vocabularies hold about a million
// (Gemma 3: 262,144 tokens, scores and types; Qwen: 152k tokens and 151k merges). Each takes ~40 bytes in memory
// however small it is on disk (an empty nested array 12 bytes, a u8 one), so the bound is what keeps a hostile
// file's metadata near its size in memory: 16.7M empty nested arrays in a 200 MB file took 1.65 GB.
constexpr uint64_t kMaxMetadataValues = uint64_t{1} << 22;

enum class ValueType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};

// Smallest encoded size of one value of `type`; used to reject element counts the file cannot hold
// before anything is allocated.
uint64_t min_encoded_size(uint32_t type) {
  switch (static_cast<ValueType>(type)) {
    case ValueType::kU8: case ValueType::kI8: case ValueType::kBool: return 1;
    case ValueType::kU16: case ValueType::kI16: return 2;
    case ValueType::kU32: case ValueType::kI32: case ValueType::kF32: return 4;
    case ValueType::kU64: case ValueType::kI64: case ValueType::kF64: return 8;
    case ValueType::kString: return 8;   // length prefix
    case ValueType::kArray: return 12;   // element type + count
  }
  return 0;  // unknown: caller reports it
}

// Bounds-checked little-endian cursor over the mapped bytes.
class Reader {
 public:
  Reader(const std::string& path, std::span<const std::byte> bytes) : path_(path), bytes_(bytes) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return bytes_.size() - pos_; }

  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(const char* what) {
    const uint64_t len = read<uint64_t>(what);
    if (len > remaining())
      throw LoadError(path_, fmt::format("truncated file: {} of {} bytes at offset {} (string length {})", what,
                                         len, pos_, len));
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), len);
    pos_ += len;
    return s;
  }

  [[noreturn]] void fail(const std::string& problem) const { throw LoadError(path_, problem); }

  // Counts `count` more metadata array elements against kMaxMetadataValues.
  void take_values(uint64_t count, const std::string& key) {
    if (count > values_left_)
      fail(fmt::format("metadata {}: an array of {} elements passes the {} array elements a file may hold in all "
                       "(the largest vocabularies hold about a million): corrupt or hostile",
                       key, count, kMaxMetadataValues));
    values_left_ -= count;
  }

 private:
  void need(size_t n, const char* what) const {
    if (n > remaining())
      throw LoadError(path_, fmt::format("truncated file: reading {} at offset {} needs {} bytes, {} left", what,
                                         pos_, n, remaining()));
  }

  const std::string& path_;
  std::span<const std::byte> bytes_;
  size_t pos_ = 0;
  uint64_t values_left_ = kMaxMetadataValues;
};

GgufValue read_value(Reader& r, uint32_t type, const std::string& key, int depth);

GgufValue read_array(Reader& r, const std::string& key, int depth) {
  if (depth >= kMaxArrayDepth) r.fail(fmt::format("metadata {}: arrays nested deeper than {}", key, kMaxArrayDepth));
  const uint32_t elem_type = r.read<uint32_t>("array element type");
  const uint64_t count = r.read<uint64_t>("array length");
  const uint64_t min_size = min_encoded_size(elem_type);
  if (min_size == 0) r.fail(fmt::format("metadata {}: unknown array element type {}", key, elem_type));
  r.take_values(count, key);
  if (count > r.remaining() / min_size)
    r.fail(fmt::format("metadata {}: array of {} elements does not fit in the {} bytes left (truncated or corrupt)",
                       key, count, r.remaining()));
  auto array = std::make_shared<GgufArray>();
  array->values.reserve(count);
  for (uint64_t i = 0; i < count; ++i) array->values.push_back(read_value(r, elem_type, key, depth + 1));
  return array;
}

GgufValue read_value(Reader& r, uint32_t type, const std::string& key, int depth) {
  switch (static_cast<ValueType>(type)) {
    case ValueType::kU8: return uint64_t{r.read<uint8_t>("u8 value")};
    case ValueType::kI8: return int64_t{r.read<int8_t>("i8 value")};
    case ValueType::kU16: return uint64_t{r.read<uint16_t>("u16 value")};
    case ValueType::kI16: return int64_t{r.read<int16_t>("i16 value")};
    case ValueType::kU32: return uint64_t{r.read<uint32_t>("u32 value")};
    case ValueType::kI32: return int64_t{r.read<int32_t>("i32 value")};
    case ValueType::kU64: return r.read<uint64_t>("u64 value");
    case ValueType::kI64: return r.read<int64_t>("i64 value");
    case ValueType::kF32: return double{r.read<float>("f32 value")};
    case ValueType::kF64: return r.read<double>("f64 value");
    case ValueType::kBool: {
      const uint8_t b = r.read<uint8_t>("bool value");
      if (b > 1) r.fail(fmt::format("metadata {}: bool value {} is neither 0 nor 1", key, b));
      return b != 0;
    }
    case ValueType::kString: return r.read_string("string value");
    case ValueType::kArray: return read_array(r, key, depth);
  }
  r.fail(fmt::format("metadata {}: unknown value type {}", key, type));
}

const char* value_kind(const GgufValue& v) {
  switch (v.index()) {
    case 0: case 1: return "integer";
    case 2: return "float";
    case 3: return "bool";
    case 4: return "string";
    default: return "array";
  }
}

std::optional<int64_t> as_int(const GgufValue& v) {
  if (const auto* u = std::get_if<uint64_t>(&v)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(*u);
  }
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  return std::nullopt;
}

std::optional<double> as_float(const GgufValue& v) {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* u = std::get_if<uint64_t>(&v)) return static_cast<double>(*u);
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  return std::nullopt;
}

}  // namespace

GgufFile::GgufFile(const std::string& path) : file_(std::make_shared<MappedFile>(path)) {
  Reader r(path, file_->bytes());
  const uint32_t magic = r.read<uint32_t>("magic");
  if (magic != kGgufMagic) r.fail(fmt::format("not a GGUF file (bad magic 0x{:08x})", magic));
  version_ = r.read<uint32_t>("version");
  if (version_ == 1) r.fail("GGUF version 1 is not supported (re-convert the model with a current llama.cpp)");
  if (version_ != 2 && version_ != 3) r.fail(fmt::format("unsupported GGUF version {}", version_));

  const uint64_t num_tensors = r.read<uint64_t>("tensor count");
  const uint64_t num_kv = r.read<uint64_t>("metadata count");
  // A KV pair takes >= 8 (key length) + 4 (type) + 1 bytes; a tensor info >= 8 + 4 + 8 + 4 + 8.
  if (num_kv > r.remaining() / 13)
    r.fail(fmt::format("metadata count {} is larger than the file can hold (truncated or corrupt)", num_kv));
  for (uint64_t i = 0; i < num_kv; ++i) {
    std::string key = r.read_string("metadata key");
    const uint32_t type = r.read<uint32_t>("metadata value type");
    GgufValue value = read_value(r, type, key, 0);
    if (!metadata_.emplace(key, std::move(value)).second) r.fail(fmt::format("duplicate metadata key {}", key));
  }

  uint64_t alignment = kDefaultAlignment;
  if (has("general.alignment")) {
    const auto a = as_int(metadata_.at("general.alignment"));
    if (!a || *a <= 0 || (*a & (*a - 1)) != 0)
      r.fail("general.alignment must be a positive power of two");
    alignment = static_cast<uint64_t>(*a);
  }

  if (num_tensors > r.remaining() / 32)
    r.fail(fmt::format("tensor count {} is larger than the file can hold (truncated or corrupt)", num_tensors));
  struct RawInfo { uint64_t offset; };
  std::vector<RawInfo> raw;
  raw.reserve(num_tensors);
  tensors_.reserve(num_tensors);
  for (uint64_t t = 0; t < num_tensors; ++t) {
    GgufTensorInfo info{};
    info.name = r.read_string("tensor name");
    const uint32_t n_dims = r.read<uint32_t>("tensor dimension count");
    if (n_dims == 0 || n_dims > kMaxDims)
      r.fail(fmt::format("tensor {} has {} dimensions (1 to {} supported)", info.name, n_dims, kMaxDims));
    std::vector<int64_t> ne(n_dims);
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t n = r.read<uint64_t>("tensor dimension");
      // 2^40 elements per dim and overall is far beyond any file this process could map.
      if (n == 0 || n > (uint64_t{1} << 40) || numel > (uint64_t{1} << 40) / n)
        r.fail(fmt::format("tensor {} has an invalid dimension {}", info.name, n));
      numel *= n;
      ne[d] = static_cast<int64_t>(n);
    }
    const uint32_t ggml_type = r.read<uint32_t>("tensor type");
    const std::optional<GgmlTypeInfo> type = ggml_type_info(ggml_type);
    if (!type)
      r.fail(fmt::format("tensor {} has unsupported GGML type {} (supported: {})", info.name, ggml_type,
                         ggml_loadable_type_names()));
    if (!type->loadable())
      r.fail(fmt::format("tensor {} has GGML type {} ({}), which Pagoda does not load (supported: {})", info.name,
                         type->name, ggml_type, ggml_loadable_type_names()));
    info.type = type->type;
    info.dtype = ggml_type_dtype(type->type).value_or(DType::kU8);
    if (ne[0] % type->block_elems != 0)
      r.fail(fmt::format("tensor {}: row length {} is not a multiple of the {} block size {}", info.name, ne[0],
                         type->name, type->block_elems));
    info.nbytes = static_cast<size_t>(numel / static_cast<uint64_t>(type->block_elems) *
                                      static_cast<uint64_t>(type->block_bytes));
    info.shape.assign(ne.rbegin(), ne.rend());
    const uint64_t offset = r.read<uint64_t>("tensor data offset");
    if (offset % alignment != 0)
      r.fail(fmt::format("tensor {}: data offset {} is not aligned to {}", info.name, offset, alignment));
    if (!tensor_index_.emplace(info.name, tensors_.size()).second)
      r.fail(fmt::format("duplicate tensor {}", info.name));
    tensors_.push_back(std::move(info));
    raw.push_back({offset});
  }

  // Tensor data starts at the next multiple of the alignment after the directory.
  const uint64_t data_start = (r.pos() + alignment - 1) / alignment * alignment;
  const uint64_t file_size = file_->size();
  for (size_t t = 0; t < tensors_.size(); ++t) {
    GgufTensorInfo& info = tensors_[t];
    const uint64_t off = raw[t].offset;
    if (data_start > file_size || off > file_size - data_start || info.nbytes > file_size - data_start - off)
      r.fail(fmt::format("tensor {}: data [{}, {}) lies outside the file ({} bytes)", info.name, data_start + off,
                         data_start + off + info.nbytes, file_size));
    info.data = file_->data() + data_start + off;
  }
  // The tensors tile the data section as the writers lay it out (llama.cpp's gguf reader requires the same): the
  // first at offset 0, each next one where the one before ends, rounded up to the alignment. A type or shape that
  // does not match the bytes shows as a tensor running into the next one, or as a gap after it (a type changed to
  // one with smaller blocks, whose bytes would still fit).
  std::vector<size_t> order(tensors_.size());
  for (size_t t = 0; t < order.size(); ++t) order[t] = t;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return raw[a].offset < raw[b].offset; });
  const auto describe = [](const GgufTensorInfo& t) {
    return fmt::format("{} bytes ({} [{}])", t.nbytes, ggml_type_info(static_cast<uint32_t>(t.type))->name,
                       fmt::join(t.shape, ", "));
  };
  if (!order.empty() && raw[order[0]].offset != 0)
    r.fail(fmt::format("tensor {}: the first tensor's data starts at offset {}, not 0", tensors_[order[0]].name,
                       raw[order[0]].offset));
  for (size_t i = 1; i < order.size(); ++i) {
    const GgufTensorInfo& prev = tensors_[order[i - 1]];
    const GgufTensorInfo& next = tensors_[order[i]];
    const uint64_t end = raw[order[i - 1]].offset + prev.nbytes;
    const uint64_t expected = (end + alignment - 1) / alignment * alignment;
    if (raw[order[i]].offset < end)
      r.fail(fmt::format("tensor {}: its {} run into tensor {} (wrong type or shape?)", prev.name, describe(prev),
                         next.name));
    if (raw[order[i]].offset != expected)
      r.fail(fmt::format("tensor {}: its {} end {} bytes before tensor {} starts (wrong type or shape?)", prev.name,
                         describe(prev), raw[order[i]].offset - end, next.name));
  }
}

const GgufValue* GgufFile::find(const std::string& key) const {
  const auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::optional<std::string> GgufFile::get_string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (const auto* s = std::get_if<std::string>(v)) return *s;
  throw LoadError(path(), fmt::format("metadata {} is a {}, expected a string", key, value_kind(*v)));
}

std::optional<int64_t> GgufFile::get_int(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (auto i = as_int(*v)) return i;
  throw LoadError(path(), fmt::format("metadata {} is a {}, expected an integer", key, value_kind(*v)));
}

std::optional<double> GgufFile::get_float(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (auto d = as_float(*v)) return d;
  throw LoadError(path(), fmt::format("metadata {} is a {}, expected a number", key, value_kind(*v)));
}

std::optional<bool> GgufFile::get_bool(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (const auto* b = std::get_if<bool>(v)) return *b;
  throw LoadError(path(), fmt::format("metadata {} is a {}, expected a bool", key, value_kind(*v)));
}

namespace {
const GgufArray* array_or_throw(const GgufFile& f, const std::string& key, const GgufValue& v) {
  if (const auto* a = std::get_if<std::shared_ptr<GgufArray>>(&v)) return a->get();
  throw LoadError(f.path(), fmt::format("metadata {} is a {}, expected an array", key, value_kind(v)));
}
}  // namespace

std::optional<std::vector<std::string>> GgufFile::get_strings(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  const GgufArray* a = array_or_throw(*this, key, *v);
  std::vector<std::string> out;
  out.reserve(a->values.size());
  for (const GgufValue& e : a->values) {
    const auto* s = std::get_if<std::string>(&e);
    if (s == nullptr)
      throw LoadError(path(), fmt::format("metadata {}: array of {}, expected strings", key, value_kind(e)));
    out.push_back(*s);
  }
  return out;
}

std::optional<std::vector<double>> GgufFile::get_floats(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  const GgufArray* a = array_or_throw(*this, key, *v);
  std::vector<double> out;
  out.reserve(a->values.size());
  for (const GgufValue& e : a->values) {
    const auto d = as_float(e);
    if (!d) throw LoadError(path(), fmt::format("metadata {}: array of {}, expected numbers", key, value_kind(e)));
    out.push_back(*d);
  }
  return out;
}

std::optional<std::vector<int64_t>> GgufFile::get_ints(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  const GgufArray* a = array_or_throw(*this, key, *v);
  std::vector<int64_t> out;
  out.reserve(a->values.size());
  for (const GgufValue& e : a->values) {
    const auto i = as_int(e);
    if (!i) throw LoadError(path(), fmt::format("metadata {}: array of {}, expected integers", key, value_kind(e)));
    out.push_back(*i);
  }
  return out;
}

}  // namespace pagoda
