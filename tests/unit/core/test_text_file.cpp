// read_text_file / open_text_file (core/text_file.h): the command line's text files, and what each failure says.
#include "pagoda/core/text_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "pagoda/core/error.h"

namespace pagoda {
namespace {

void expect_error(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no Error; expected " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(TextFile, ReadsTheWholeFileAndNamesWhatIsWrong) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "pagoda_text_file_test";
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "prompt.txt").string();
  const std::string text("line one\r\nline two\0 after a NUL\n", 32);
  std::ofstream(file, std::ios::binary) << text;
  EXPECT_EQ(read_text_file(file), text) << "bytes as written: no newline translation, NULs kept";
  std::ifstream lines = open_text_file(file);
  std::string first;
  std::getline(lines, first);
  EXPECT_EQ(first, "line one\r");
  // A directory opens as an empty stream on Linux: it read as a file with no text ("1 tokens, fewer than one chunk").
  expect_error([&] { read_text_file(dir.string()); }, "is a directory");
  expect_error([&] { open_text_file(dir.string()); }, "is a directory");
  expect_error([&] { read_text_file((dir / "missing.txt").string()); }, "cannot open (No such file or directory)");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pagoda
