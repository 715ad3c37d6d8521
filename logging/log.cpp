// The one file that compiles spdlog and fmt into DELTA (log.hpp says why).
#include "logging/log.hpp"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <fmt/args.h>

#include <cstdlib>
#include <mutex>

namespace delta::log {
namespace {

spdlog::level::level_enum to_spdlog(Level level) {
  switch (level) {
    case Level::trace: return spdlog::level::trace;
    case Level::debug: return spdlog::level::debug;
    case Level::info: return spdlog::level::info;
    case Level::warn: return spdlog::level::warn;
    case Level::error: return spdlog::level::err;
    case Level::critical: return spdlog::level::critical;
    case Level::off: return spdlog::level::off;
  }
  return spdlog::level::off;
}

}  // namespace

bool enabled(Level level) noexcept {
  try {
    return spdlog::default_logger_raw()->should_log(to_spdlog(level));
  } catch (...) {
    return false;
  }
}

void write(Level level, std::string_view message) noexcept {
  try {
    spdlog::default_logger_raw()->log(to_spdlog(level), message);
  } catch (...) {
  }
}

namespace detail {

std::string number_text(long long value) { return fmt::format("{}", value); }
std::string number_text(unsigned long long value) { return fmt::format("{}", value); }
std::string number_text(double value) { return fmt::format("{}", value); }

void write_filled(Level level, std::string_view text, const std::string* arguments, std::size_t count) noexcept {
  try {
    fmt::dynamic_format_arg_store<fmt::format_context> store;
    for (std::size_t i = 0; i < count; ++i) store.push_back(std::string_view(arguments[i]));
    write(level, fmt::vformat(text, store));
  } catch (...) {
  }
}

}  // namespace detail

void configure_from_environment() {
  static std::once_flag once;
  std::call_once(once, [] {
    // DELTA runs inside other people's programs: its messages go to stderr, never into the
    // job's stdout, through a logger of its own (spdlog is compiled into this library, so its
    // registry is private to it).
    try {
      spdlog::set_default_logger(spdlog::stderr_logger_mt("delta"));
    } catch (const std::exception&) {
      // A logger of that name exists already: keep it.
    }
    spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [delta] [%l] %v");
    const char* level = std::getenv("DELTA_LOG_LEVEL");
    if (!level) {
      spdlog::set_level(spdlog::level::warn);
      return;
    }
    const auto parsed = spdlog::level::from_str(level);
    if (parsed == spdlog::level::off && std::string_view(level) != "off") {
      spdlog::set_level(spdlog::level::warn);
      warn("DELTA_LOG_LEVEL='{}' is not one of trace, debug, info, warn, error, critical, off; using warn", level);
      return;
    }
    spdlog::set_level(parsed);
  });
}

}  // namespace delta::log
