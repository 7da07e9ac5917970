// MappedFile: a read-only mmap of a whole file, so checkpoints are read lazily and shared with the page cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace pagoda {

class MappedFile {
 public:
  // Throws LoadError naming the path when the file cannot be opened or mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<const std::byte> bytes() const { return {data_, size_}; }

 private:
  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace pagoda
