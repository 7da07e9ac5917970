// Helpers for loader tests: a temp directory, a tiny GGUF writer and a tiny safetensors writer, so that
// tests can build well-formed and deliberately malformed checkpoints byte by byte.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "pagoda/core/error.h"

namespace pagoda::test {

namespace fs = std::filesystem;

inline std::string data_dir() { return PAGODA_TEST_DATA_DIR; }
inline std::string stories_gguf() { return data_dir() + "/../../models/stories260K.gguf"; }

// A fresh directory under the system temp dir, removed with its contents at destruction.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = fs::temp_directory_path() /
            ("pagoda_loader_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string path() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Appends little-endian values to a byte vector.
struct ByteWriter {
  std::vector<uint8_t> bytes;
  template <typename T>
  void put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes.insert(bytes.end(), p, p + sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
  }
  void put_raw(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    bytes.insert(bytes.end(), p, p + n);
  }
  void pad_to(size_t alignment) {
    while (bytes.size() % alignment != 0) bytes.push_back(0);
  }
};

// Minimal GGUF writer. Metadata values are written by callbacks so tests can emit any type; tensors are
// given in row-major shape (reversed into GGML ne[] on write) with raw data bytes.
class GgufWriter {
 public:
  uint32_t version = 3;
  uint32_t magic = 0x46554747;
  uint32_t alignment = 32;

  void kv_u32(const std::string& k, uint32_t v) { add_kv(k, 4, [v](ByteWriter& w) { w.put(v); }); }
  void kv_i32(const std::string& k, int32_t v) { add_kv(k, 5, [v](ByteWriter& w) { w.put(v); }); }
  void kv_f32(const std::string& k, float v) { add_kv(k, 6, [v](ByteWriter& w) { w.put(v); }); }
  void kv_u64(const std::string& k, uint64_t v) { add_kv(k, 10, [v](ByteWriter& w) { w.put(v); }); }
  void kv_bool(const std::string& k, bool v) { add_kv(k, 7, [v](ByteWriter& w) { w.put<uint8_t>(v); }); }
  void kv_str(const std::string& k, const std::string& v) { add_kv(k, 8, [v](ByteWriter& w) { w.put_string(v); }); }
  void kv_raw(const std::string& k, uint32_t type, std::function<void(ByteWriter&)> body) {
    add_kv(k, type, std::move(body));
  }
  void kv_strings(const std::string& k, const std::vector<std::string>& v) {
    add_kv(k, 9, [v](ByteWriter& w) {
      w.put<uint32_t>(8);
      w.put<uint64_t>(v.size());
      for (const auto& s : v) w.put_string(s);
    });
  }

  void tensor(const std::string& name, uint32_t ggml_type, std::vector<uint64_t> shape, std::vector<uint8_t> data) {
    tensors_.push_back({name, ggml_type, std::move(shape), std::move(data), std::nullopt});
  }
  // Forces the recorded data offset of the last tensor (to build tensors that point outside the file).
  void override_last_offset(uint64_t offset) { tensors_.back().offset = offset; }

  std::vector<uint8_t> build() const {
    ByteWriter w;
    w.put(magic);
    w.put(version);
    w.put<uint64_t>(tensors_.size());
    w.put<uint64_t>(kvs_.size());
    for (const auto& kv : kvs_) {
      w.put_string(kv.key);
      w.put(kv.type);
      kv.body(w);
    }
    uint64_t offset = 0;
    std::vector<uint64_t> offsets;
    for (const auto& t : tensors_) {
      w.put_string(t.name);
      w.put<uint32_t>(t.shape.size());
      for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) w.put<uint64_t>(*it);
      w.put(t.type);
      w.put<uint64_t>(t.offset.value_or(offset));
      offsets.push_back(offset);
      offset += (t.data.size() + alignment - 1) / alignment * alignment;
    }
    w.pad_to(alignment);
    for (const auto& t : tensors_) {
      w.put_raw(t.data.data(), t.data.size());
      w.pad_to(alignment);
    }
    return w.bytes;
  }

  void write(const std::string& path) const { write_bytes(path, build()); }

 private:
  struct Kv {
    std::string key;
    uint32_t type;
    std::function<void(ByteWriter&)> body;
  };
  struct T {
    std::string name;
    uint32_t type;
    std::vector<uint64_t> shape;
    std::vector<uint8_t> data;
    std::optional<uint64_t> offset;
  };
  void add_kv(const std::string& k, uint32_t type, std::function<void(ByteWriter&)> body) {
    kvs_.push_back({k, type, std::move(body)});
  }
  std::vector<Kv> kvs_;
  std::vector<T> tensors_;
};

template <typename T>
std::vector<uint8_t> to_bytes(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// Minimal safetensors writer: tensors with dtype string, shape and raw bytes; header JSON can be
// overridden for malformed-file tests.
class SafetensorsWriter {
 public:
  void tensor(const std::string& name, const std::string& dtype, std::vector<int64_t> shape,
              std::vector<uint8_t> data) {
    tensors_.push_back({name, dtype, std::move(shape), std::move(data)});
  }

  nlohmann::json header() const {
    nlohmann::json h = nlohmann::json::object();
    h["__metadata__"] = {{"format", "pt"}};
    size_t offset = 0;
    for (const auto& t : tensors_) {
      h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.data.size()}}};
      offset += t.data.size();
    }
    return h;
  }

  // Like the reference writer, pads the header with spaces so the data starts 8-byte aligned.
  std::vector<uint8_t> build() const {
    std::string h = header().dump();
    while ((8 + h.size()) % 8 != 0) h += ' ';
    return build_with_header(h);
  }

  std::vector<uint8_t> build_with_header(const std::string& header_text) const {
    ByteWriter w;
    w.put<uint64_t>(header_text.size());
    w.put_raw(header_text.data(), header_text.size());
    for (const auto& t : tensors_) w.put_raw(t.data.data(), t.data.size());
    return w.bytes;
  }

  void write(const std::string& path) const { write_bytes(path, build()); }

 private:
  struct T {
    std::string name, dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> data;
  };
  std::vector<T> tensors_;
};

// Expects `fn` to throw pagoda::LoadError whose message contains every string in `needles`.
template <typename Fn>
void expect_load_error(Fn&& fn, const std::vector<std::string>& needles) {
  try {
    fn();
    ADD_FAILURE() << "expected a LoadError";
  } catch (const LoadError& e) {
    const std::string msg = e.what();
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected a LoadError, got: " << e.what();
  }
}

}  // namespace pagoda::test
