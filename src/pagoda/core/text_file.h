// Text files a user names on the command line (a prompt or prompts file, a JSON schema, a chat template, a
// calibration or perplexity text, a bench dataset): one place that opens them and says what is wrong.
#pragma once

#include <fstream>
#include <string>

namespace pagoda {

// The whole file. A directory, or a file that cannot be opened, is an InvalidRequest (the user named it) naming
// the path, `what` it was to be ("the calibration text"; may be empty) and why (a directory opens as an empty
// stream on Linux, which read as "no text"); a read error an Error.
std::string read_text_file(const std::string& path, const std::string& what = "");

// The file, checked as read_text_file checks it, for reading a line at a time.
std::ifstream open_text_file(const std::string& path, const std::string& what = "");

}  // namespace pagoda
