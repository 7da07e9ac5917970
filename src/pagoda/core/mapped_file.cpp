// POSIX mmap of a read-only file.
#include "pagoda/core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <signal.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "pagoda/core/error.h"

namespace pagoda {
namespace {

// A file shrunk (truncated, rewritten in place) while mapped takes the pages past its new end with it, and
// the next read of one raises SIGBUS. That cannot be undone, but it can be said clearly: the handler names
// the file and exits 1 instead of dumping core. Live mappings are kept in a fixed table that the handler
// reads without locks.
struct LiveMapping {
  std::atomic<const std::byte*> begin{nullptr};
  std::atomic<size_t> size{0};
  char path[512] = {};
};
std::array<LiveMapping, 256> g_mappings;
std::mutex g_mappings_mutex;  // registration only; the handler never takes it

void on_sigbus(int sig, siginfo_t* info, void*) {
  const auto* addr = static_cast<const std::byte*>(info->si_addr);
  for (const LiveMapping& m : g_mappings) {
    const std::byte* begin = m.begin.load(std::memory_order_acquire);
    if (begin == nullptr || addr < begin || addr >= begin + m.size.load(std::memory_order_relaxed)) continue;
    constexpr char kHead[] = "error: ";
    constexpr char kTail[] =
        " changed size while it was mapped (--mmap): the part past its new end is gone. Keep model files "
        "unchanged while serving them, or load without --mmap (the default copies the weights into memory).\n";
    (void)!::write(STDERR_FILENO, kHead, sizeof kHead - 1);
    (void)!::write(STDERR_FILENO, m.path, ::strnlen(m.path, sizeof m.path));
    (void)!::write(STDERR_FILENO, kTail, sizeof kTail - 1);
    ::_exit(1);
  }
  ::signal(sig, SIG_DFL);  // not one of ours: the default action (a core dump)
  ::raise(sig);
}

void register_mapping(const std::byte* data, size_t size, const std::string& path) {
  std::lock_guard lock(g_mappings_mutex);
  static const bool installed = [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    return ::sigaction(SIGBUS, &sa, nullptr) == 0;
  }();
  (void)installed;
  for (LiveMapping& m : g_mappings) {
    if (m.begin.load(std::memory_order_relaxed) != nullptr) continue;
    std::strncpy(m.path, path.c_str(), sizeof m.path - 1);
    m.size.store(size, std::memory_order_relaxed);
    m.begin.store(data, std::memory_order_release);
    return;
  }
  // More than 256 files mapped at once: the rest fault with the default message.
}

void unregister_mapping(const std::byte* data) {
  std::lock_guard lock(g_mappings_mutex);
  for (LiveMapping& m : g_mappings)
    if (m.begin.load(std::memory_order_relaxed) == data) m.begin.store(nullptr, std::memory_order_release);
}

}  // namespace

MappedFile::MappedFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw LoadError(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw LoadError(path, "not a regular file");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw LoadError(path, std::string("cannot mmap: ") + std::strerror(err));
    }
    data_ = static_cast<const std::byte*>(p);
    register_mapping(data_, size_, path_);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) {
    unregister_mapping(data_);
    ::munmap(const_cast<std::byte*>(data_), size_);
  }
}

}  // namespace pagoda
