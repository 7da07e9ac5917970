// pagoda::Error: the typed exception for recoverable failures (unreadable model files, bad requests,
// out of memory at start-up). Its message is one line that names the input and the problem; it is
// caught at the boundary (CLI main, engine thread, HTTP handler) and never crashes the process.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace pagoda {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A model or tokenizer file that cannot be used: the message starts with the file's path.
class LoadError : public Error {
 public:
  LoadError(const std::string& path, const std::string& problem) : Error(path + ": " + problem) {}
};

// A request that cannot be served as asked (bad parameter, prompt too long, ...).
class InvalidRequest : public Error {
 public:
  using Error::Error;
};

}  // namespace pagoda
