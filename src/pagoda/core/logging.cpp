// Process-wide logger setup.
#include "pagoda/core/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace pagoda {

void init_logging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("pagoda");
  logger->set_pattern("%^%L%$ %H:%M:%S.%e %v");
  logger->set_level(spdlog::level::from_str(level));
  spdlog::set_default_logger(logger);
}

}  // namespace pagoda
