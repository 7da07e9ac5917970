// read_text_file, open_text_file (text_file.h).
#include "pagoda/core/text_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>

#include "pagoda/core/error.h"

namespace pagoda {

std::ifstream open_text_file(const std::string& path, const std::string& what) {
  const std::string as = what.empty() ? "" : " " + what;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InvalidRequest(fmt::format("{}: is a directory, not a file{}", path, what.empty() ? "" : " (" + what + ")"));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InvalidRequest(fmt::format("{}: cannot open{} ({})", path, as, std::strerror(errno)));
  return in;
}

std::string read_text_file(const std::string& path, const std::string& what) {
  std::ifstream in = open_text_file(path, what);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(fmt::format("{}: read error", path));
  return text.str();
}

}  // namespace pagoda
